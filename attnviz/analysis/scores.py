"""Score functions of the general attention model: how a query and a key become one number (torch).

Attention is softmax(score(q, k)) over the keys; the score function is the part that varies:
    dot         q . k                                   (Luong et al. 2015)
    scaled_dot  q . k / sqrt(d)                         (Vaswani et al. 2017)
    general     q^T W k, a learned bilinear form         (Luong et al. 2015)
    additive    v^T tanh(W_q q + W_k k), a small MLP    (Bahdanau et al. 2015)
Why scale the dot product and not the additive score: with entries of unit variance a dot product sums d
products, so its variance grows like d and the softmax saturates for large d; dividing by sqrt(d) keeps it
near 1. The additive score passes through tanh, which bounds every hidden unit to (-1, 1), so |score| <= |v|_1
whatever d is, and its spread stays put as d grows (the general score grows like the dot product).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from .. import checks
from ..attention import SCORE_FUNCTIONS, additive_scores, dot_scores, general_scores, stages_from_scores
from ..trace.window_cache import remembered
from .stats import histogram

__all__ = [
    "SCORE_FUNCTIONS",
    "ScoreModule",
    "additive_scores",
    "dot_scores",
    "general_scores",
    "scaled_dot_scores",
    "seeded_queries_keys",
    "sharpness",
    "softmax_inputs",
    "DrawnInputs",
    "drawn_softmax_inputs",
    "spread_by_width",
]


def scaled_dot_scores(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    return dot_scores(q, k) / math.sqrt(q.shape[-1])


@dataclass(frozen=True)
class ScoreModule:
    """Seeded parameters for every score function at width d (entries ~ N(0, 1/d), like nn.Linear's scale).

    The additive score's hidden size is `hidden`; v ~ N(0, 1/hidden).
    """

    w: torch.Tensor
    w_q: torch.Tensor
    w_k: torch.Tensor
    v: torch.Tensor

    @classmethod
    def seeded(cls, d: int, hidden: int = 32, seed: int = 0) -> ScoreModule:
        g = torch.Generator().manual_seed(seed)
        n = lambda *shape, fan: torch.randn(*shape, generator=g) / math.sqrt(fan)  # noqa: E731
        return cls(n(d, d, fan=d), n(hidden, d, fan=d), n(hidden, d, fan=d), n(hidden, fan=hidden))

    def scores(self, name: str, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        if name == "dot":
            return dot_scores(q, k)
        if name == "scaled_dot":
            return scaled_dot_scores(q, k)
        if name == "general":
            return general_scores(q, k, self.w)
        if name == "additive":
            return additive_scores(q, k, self.w_q, self.w_k, self.v)
        raise ValueError(f"unknown score function {name!r}; choose one of {SCORE_FUNCTIONS}")

    def all(self, q: torch.Tensor, k: torch.Tensor, mask=None) -> dict:
        """name -> (scores, weights) for every score function; weights = softmax over keys (mask: True = may attend)."""
        out = {}
        for name in SCORE_FUNCTIONS:
            s = self.scores(name, q, k)
            out[name] = (s, stages_from_scores(s, 1.0, mask).weights)
        return out


@remembered  # seeded: the same numbers for every visit with the same widths and seed
def spread_by_width(dims=(4, 16, 64, 256, 1024), n: int = 64, seed: int = 0) -> dict:
    """name -> [std of the scores at each width d] for n random unit-variance queries and keys.

    The numbers behind "scale the dot product, not the additive score": dot and general grow like sqrt(d),
    scaled_dot and additive do not.
    """
    dims, n = checks.sizes("dims", dims, high=4096), checks.whole("n", n, low=1, high=1024)
    seed = checks.whole("seed", seed, low=0, high=2**62)
    out = {name: [] for name in SCORE_FUNCTIONS}
    for d in dims:
        g = torch.Generator().manual_seed(seed + d)
        q, k = torch.randn(n, d, generator=g), torch.randn(n, d, generator=g)
        module = ScoreModule.seeded(d, seed=seed)
        for name in SCORE_FUNCTIONS:
            out[name].append(float(module.scores(name, q, k).std()))
    return out


def seeded_queries_keys(n: int, d: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """n standard-normal queries and n keys of width d that depend only on `seed`."""
    g = torch.Generator().manual_seed(int(seed))
    return torch.randn(n, d, generator=g), torch.randn(n, d, generator=g)


def softmax_inputs(traces: dict, head: int, layer: int = 0) -> dict:
    """name -> (scaled [query, key], weights [query, key]) of one head: what each score function hands the softmax
    (its scores times the scale it applies) and what comes out. `traces`: name -> AttentionTrace. Only that head is
    computed: a whole layer would be every head's [query, key] (not kept: at 2,048 tokens they are 134 MB)."""
    out = {}
    for name, tr in traces.items():
        one = tr.stages(layer, heads=[head])
        out[name] = (one.scaled[0], one.weights[0])
    return out


@dataclass(frozen=True)
class DrawnInputs:
    """What the Score functions page shows of `softmax_inputs`: `results` name -> (the histogram of its softmax
    inputs, every cell; its weights [query, key] within `window`), `shape` the whole (queries, keys) and `sharpness`
    its rows. A few hundred KB where the inputs are 2 x 4 x [query, key] (134 MB at 2,048 tokens)."""

    results: dict
    window: tuple[tuple[int, int], tuple[int, int]]
    shape: tuple[int, int]
    sharpness: list[dict]


@remembered  # a revisit, or another visitor, reads it instead of four heads' stages and 16M values binned at 2,048
def drawn_softmax_inputs(traces: dict, head: int, window, bins: int = 40, layer: int = 0) -> DrawnInputs:
    """`softmax_inputs(traces, head, layer)` binned into `bins` bars and cut to window ((q0, q1), (k0, k1)), with
    their `sharpness`; kept for every session."""
    one = next(iter(traces.values()))
    (q0, q1), (k0, k1) = checks.inside_cells("window", window, one.n_tokens, one.n_keys)  # before any work
    full = softmax_inputs(traces, head, layer)
    shape = np.shape(next(iter(full.values()))[1])
    results = {
        name: (histogram(np.asarray(scaled), bins=bins), np.ascontiguousarray(np.asarray(weights)[q0:q1, k0:k1]))
        for name, (scaled, weights) in full.items()
    }
    return DrawnInputs(results, ((q0, q1), (k0, k1)), shape, sharpness(full))


def sharpness(results: dict) -> list[dict]:
    """One row per score function: the spread of the softmax inputs, the mean of each row's largest weight and the
    mean row entropy in nats (log n for uniform rows, 0 for one-hot rows). `results` as from `softmax_inputs` or
    `ScoreModule.all` (numpy arrays or torch tensors)."""
    rows = []
    for name, (scaled, weights) in results.items():
        scaled, w = np.asarray(scaled, np.float64), np.asarray(weights, np.float64)
        entropy = -(np.where(w > 0, w * np.log(np.where(w > 0, w, 1.0)), 0.0)).sum(-1)
        rows.append(
            {
                "score function": name,
                "std of softmax input": float(np.std(scaled)),
                "mean largest weight": float(w.max(-1).mean()),
                "mean entropy": float(entropy.mean()),
            }
        )
    return rows
