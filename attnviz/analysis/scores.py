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

import dataclasses
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
    "HeadSummary",
    "head_summary",
    "head_window",
    "score_functions",
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


#: Query rows per block when one head's stages are computed for every pair: about this many cells of each stage.
BLOCK_CELLS = 2**20


@dataclass(frozen=True)
class HeadSummary:
    """One head of our module over every query-key pair of the text, per score function: `histograms` name -> the
    Histogram of its softmax inputs (its scores times the scale it applies), `sharpness` one row per score function
    (the rows `sharpness` gives), `shape` the (queries, keys)."""

    histograms: dict
    sharpness: list[dict]
    shape: tuple[int, int]


def score_functions(src) -> dict:
    """name -> the ScoreFunction our module `src` (a ModuleSource) runs with score=name, its parameters as
    `src.build()` draws them; the projections, hence q and k, are the same for all of them."""
    return {name: dataclasses.replace(src, score=name).build().score_fn for name in SCORE_FUNCTIONS}


def _head_blocks(trace, fn, head: int, rows: tuple[int, int]):
    """(first row, Stages [rows of the block, key]) of one head under score function `fn`, a block of query rows in
    `rows` at a time: that head's q and k from `trace` (our module with a dot-product score, whose record keeps them),
    scored by `fn`, scaled as `fn`'s own trace would be (the trace's scale if one was asked for, else `fn`'s
    default), masked with the trace's mask and fill. Call under torch.inference_mode()."""
    q, k = (torch.tensor(v) for v in trace.vectors(0, head))
    given = dict(trace.options).get("scale")
    scale, fill = fn.default_scale(trace.d_head) if given is None else float(given), trace.facts(0).fill
    step = max(1, BLOCK_CELLS // max(1, trace.n_keys))
    for r0 in range(rows[0], rows[1], step):
        r1 = min(r0 + step, rows[1])
        mask = torch.tensor(trace.layer_mask(0, queries=(r0, r1)))
        yield r0, stages_from_scores(fn.of_head(head, q[r0:r1], k), scale, mask, fill)


@remembered  # a revisit, or another visitor, reads four histograms and rows instead of 4 x [query, key] again
def head_summary(trace, src, head: int, bins: int = 40) -> HeadSummary:
    """Every query-key pair of one head under each score function of our module `src` (`score_functions`; `trace`:
    src's trace with a dot-product score), a block of query rows at a time: the histogram of the softmax inputs over
    every cell and the rows' sharpness. Only that head is computed, never a [query, key, hidden] tensor of more than
    a block, and exact (the numbers the whole [query, key] stages give)."""
    head = checks.check_index("head", head, trace.n_head)
    bins = checks.whole("bins", bins, low=1, high=1000)
    n, m = trace.n_tokens, trace.n_keys
    histograms, rows = {}, []
    for name, fn in score_functions(src).items():
        scaled, peak, entropy = np.empty((n, m), np.float32), 0.0, 0.0
        with torch.inference_mode():
            for r0, st in _head_blocks(trace, fn, head, (0, n)):
                scaled[r0 : r0 + st.scaled.shape[0]] = st.scaled.numpy()
                peak += float(st.weights.amax(-1).double().sum())
                entropy += float(torch.special.entr(st.weights).sum(-1).double().sum())  # rows in float32
        histograms[name] = h = histogram(scaled, bins=bins)
        rows.append(
            {
                "score function": name,
                "std of softmax input": math.sqrt(h.var),
                "mean largest weight": peak / n,
                "mean entropy": entropy / n,
            }
        )
    return HeadSummary(histograms, rows, (n, m))


@remembered  # moving the window back, or a revisit, reads the window kept
def head_window(trace, src, head: int, window) -> dict:
    """name -> one head's weights [query, key] within window ((q0, q1), (k0, k1)) under each score function of our
    module `src` (as `head_summary`): only the window's query rows are computed, over every key (the softmax needs
    them all)."""
    head = checks.check_index("head", head, trace.n_head)
    (q0, q1), (k0, k1) = checks.inside_cells("window", window, trace.n_tokens, trace.n_keys)  # before any work
    out = {}
    with torch.inference_mode():
        for name, fn in score_functions(src).items():
            out[name] = torch.cat([st.weights[:, k0:k1] for _, st in _head_blocks(trace, fn, head, (q0, q1))]).numpy()
    return out


def sharpness(results: dict) -> list[dict]:
    """One row per score function: the spread of the softmax inputs, the mean of each row's largest weight and the
    mean row entropy in nats (log n for uniform rows, 0 for one-hot rows). `results` name -> (softmax inputs, weights)
    as from `ScoreModule.all` (numpy arrays or torch tensors); `head_summary` gives the same rows for our module."""
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
