"""How a query and a key become one score: the general attention model.
The score need not be a dot product (`ScoreFunction`, the general attention model): `dot` q.k, `scaled_dot`
q.k with the 1/sqrt(d) scale (the default), `general` q^T W k (Luong et al. 2015) and `additive`
v^T tanh(W_q q + W_k k) (Bahdanau et al. 2015). Whatever it is, its output is the `scores` stage and the
stages after it are unchanged. Only scaled_dot scales by default: tanh bounds every hidden unit of the
additive score, so |score| <= sum |v| at any width, while dot and general grow like sqrt(d).
"""

from __future__ import annotations

import math

import torch
from torch import nn

from .. import checks
from ..attention import SCORE_FUNCTIONS, additive_scores, default_scale, dot_scores, general_scores
from ..errors import ArgumentError


class ScoreFunction(nn.Module):
    """How every head turns a query and a key into one score, with its own seeded parameters (per head).

    general: W [head, d_head, d_head]; additive: W_q, W_k [head, hidden, d_head] and v [head, hidden]; entries
    N(0, 1/fan_in), drawn from `seed` alone (the global RNG is neither read nor moved). dot and scaled_dot have
    no parameters; `default_scale` says which scale the stages apply when the caller gives none.
    """

    def __init__(self, kind: str = "scaled_dot", n_head: int = 1, d_head: int = 1, hidden=None, seed: int = 0):
        super().__init__()
        if not isinstance(kind, str) or kind not in SCORE_FUNCTIONS:
            raise ArgumentError(
                "score",
                f"The score function must be one of {', '.join(SCORE_FUNCTIONS)}; got {checks.shown(kind)} (score).",
            )
        hidden = checks.whole("score_hidden", hidden, low=1, high=checks.MAX_WIDTH, none=True)
        self.kind, self.hidden, self.n_head = kind, hidden or d_head, n_head
        g = torch.Generator().manual_seed(checks.whole("score_seed", seed, low=0, high=2**63 - 1))
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

    def of_head(self, head: int, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        """One head's scores alone: q [Tq, hd], k [Tk, hd] -> [Tq, Tk] with head `head`'s parameters, what `forward`
        gives that head without computing the others (a page that shows one head: the additive score's hidden
        layer is [Tq, Tk, hidden] per head)."""
        head = checks.check_index("head", head, self.n_head)
        if self.kind == "general":
            return general_scores(q, k, self.w[head])
        if self.kind == "additive":
            return additive_scores(q, k, self.w_q[head], self.w_k[head], self.v[head])
        return dot_scores(q, k)
