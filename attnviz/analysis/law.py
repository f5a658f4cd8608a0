"""The 1/sqrt(d) law, reproduced numerically on random vectors.

If q and k have i.i.d. entries with mean 0 and variance 1, then q.k = sum_i q_i k_i is a sum of d
independent terms of variance 1: Var(q.k) = d. Dividing by sqrt(d) gives variance 1 whatever d is.
Unscaled, the softmax input spreads like sqrt(d), so for large d one key takes nearly all the weight
(max weight -> 1, entropy -> 0) and the softmax's gradients vanish.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import checks
from .stats import row_entropy


@dataclass(frozen=True)
class LawRow:
    d: int
    var_scores: float  # Var(q.k): about d
    var_scaled: float  # Var(q.k / sqrt(d)): about 1
    max_weight_scores: float  # mean over rows of the largest softmax weight, unscaled
    max_weight_scaled: float
    entropy_scores: float  # mean row entropy in nats, unscaled (log(n_keys) is uniform, 0 is one-hot)
    entropy_scaled: float


def _softmax_rows(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


@checks.public(name="attnviz.sqrt_d_law")
def sqrt_d_law(dims=(4, 16, 64, 256, 1024), n_queries: int = 1000, n_keys: int = 64, seed: int = 0) -> list[LawRow]:
    """For each d: draw queries [n_queries, d] and keys [n_keys, d] from N(0, 1), measure both variances and
    how saturated the softmax rows are with and without the 1/sqrt(d) scale.

    With n_queries=10000 and d=64 the variances come out near 64 and near 1.
    """
    dims = checks.sizes("dims", dims)
    n_queries = checks.whole("n_queries", n_queries, low=1, high=checks.MAX_TOKENS)
    n_keys = checks.whole("n_keys", n_keys, low=1, high=checks.MAX_TOKENS)
    checks.cells("sqrt_d_law", n_queries, n_keys + max(dims, default=1), most=2**26)  # float64: 512 MB at most
    rng = np.random.default_rng(checks.whole("seed", seed, low=0, high=2**62))
    rows = []
    for d in dims:
        q = rng.standard_normal((n_queries, d))
        k = rng.standard_normal((n_keys, d))
        scores = q @ k.T  # [n_queries, n_keys]
        scaled = scores / np.sqrt(d)
        p_raw, p_scaled = _softmax_rows(scores), _softmax_rows(scaled)
        rows.append(
            LawRow(
                d=int(d),
                var_scores=float(scores.var()),
                var_scaled=float(scaled.var()),
                max_weight_scores=float(p_raw.max(axis=-1).mean()),
                max_weight_scaled=float(p_scaled.max(axis=-1).mean()),
                entropy_scores=float(row_entropy(p_raw).mean()),
                entropy_scaled=float(row_entropy(p_scaled).mean()),
            )
        )
    return rows
