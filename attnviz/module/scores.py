"""How a query and a key become one score: the general attention model.
e need not be a dot product (`ScoreFunction`, the general attention model): `dot` q.k, `scaled_dot`
q.k with the 1/sqrt(d) scale (the default), `general` q^T W k (Luong et al. 2015) and `additive`
v^T tanh(W_q q + W_k k) (Bahdanau et al. 2015). Whatever it is, its output is the `scores` stage and the
stages after it are unchanged. Only scaled_dot scales by default: tanh bounds every hidden unit of the
additive score, so |score| <= sum |v| at any width, while dot and general grow like sqrt(d).
"""

from __future__ import annotations

import math

import torch
from torch import nn

from ..attention import default_scale
from ..errors import InputError

SCORE_FUNCTIONS = ("dot", "scaled_dot", "general", "additive")
ADDITIVE_CHUNK = 2**24  # float32 hidden units held at once by the additive score (64 MB); longer texts go in blocks


def dot_scores(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """q [..., Tq, d], k [..., Tk, d] -> q.k for every pair, [..., Tq, Tk]."""
    return q @ k.transpose(-2, -1)


def general_scores(q: torch.Tensor, k: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """q^T W k for every pair; w [..., d_q, d_k] (one per head when it has a head axis)."""
    return q @ w @ k.transpose(-2, -1)


def additive_scores(q, k, w_q: torch.Tensor, w_k: torch.Tensor, v: torch.Tensor, chunk: int = ADDITIVE_CHUNK):
    """v^T tanh(W_q q + W_k k) for every pair; w_q [..., h, d_q], w_k [..., h, d_k], v [..., h].

    The hidden layer is [..., Tq, Tk, h]: queries are taken in blocks so at most about `chunk` of it exists.
    """
    hq = q @ w_q.transpose(-2, -1)  # [..., Tq, h]
    hk = (k @ w_k.transpose(-2, -1)).unsqueeze(-3)  # [..., 1, Tk, h]
    v = v[..., None, None, :]  # [..., 1, 1, h]
    step = max(1, chunk // max(1, hk.numel()))
    blocks = [(torch.tanh(hq[..., i : i + step, None, :] + hk) * v).sum(-1) for i in range(0, hq.shape[-2], step)]
    return torch.cat(blocks, dim=-2) if blocks else hq.new_zeros((*hq.shape[:-1], k.shape[-2]))


class ScoreFunction(nn.Module):
    """How every head turns a query and a key into one score, with its own seeded parameters (per head).

    general: W [head, d_head, d_head]; additive: W_q, W_k [head, hidden, d_head] and v [head, hidden]; entries
    N(0, 1/fan_in), drawn from `seed` alone (the global RNG is neither read nor moved). dot and scaled_dot have
    no parameters; `default_scale` says which scale the stages apply when the caller gives none.
    """

    def __init__(self, kind: str = "scaled_dot", n_head: int = 1, d_head: int = 1, hidden=None, seed: int = 0):
        super().__init__()
        if kind not in SCORE_FUNCTIONS:
            raise InputError(f"The score function must be one of {', '.join(SCORE_FUNCTIONS)}; got {kind!r}.")
        self.kind, self.hidden = kind, int(hidden or d_head)
        g = torch.Generator().manual_seed(int(seed))
        normal = lambda *shape: nn.Parameter(torch.randn(*shape, generator=g) / math.sqrt(shape[-1]))  # noqa: E731
        if kind == "general":
            self.w = normal(n_head, d_head, d_head)
        elif kind == "additive":
            self.w_q, self.w_k = normal(n_head, self.hidden, d_head), normal(n_head, self.hidden, d_head)
            self.v = normal(n_head, self.hidden)

    def extra_repr(self) -> str:
        return f"kind={self.kind}" + (f", hidden={self.hidden}" if self.kind == "additive" else "")

    def default_scale(self, d_head: int) -> float:
        """1/sqrt(d_head) for scaled_dot; 1 for the others (dot is the unscaled one; see the module docstring)."""
        return default_scale(d_head) if self.kind == "scaled_dot" else 1.0

    def forward(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        """q [B, nh, Tq, hd], k [B, nh, Tk, hd] -> scores [B, nh, Tq, Tk] (before any scale or mask)."""
        if self.kind == "general":
            return general_scores(q, k, self.w)
        if self.kind == "additive":
            return additive_scores(q, k, self.w_q, self.w_k, self.v)
        return dot_scores(q, k)
