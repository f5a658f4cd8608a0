"""The 1/sqrt(d) law (seeds 000 and 003), reproduced numerically by attnviz.sqrt_d_law.

q, k ~ N(0, I_d): Var(q.k) = d, Var(q.k / sqrt(d)) = 1. Without the scale the softmax saturates as d grows.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import attnviz

DIMS = (4, 16, 64, 256)


def relative_standard_error(d: int, n_queries: int, n_keys: int) -> float:
    """Sampling error of the measured Var(q.k), relative to d.

    The score matrix's variance is tr(A B) with A, B the sample second-moment matrices of the queries and
    keys (each I + noise): tr(A B) = d + tr(E_A) + tr(E_B) + tr(E_A E_B), where Var(tr E_A) = 2d/n_queries,
    Var(tr E_B) = 2d/n_keys and the product term is about d^2/(n_queries n_keys).
    """
    var = 2 * d / n_queries + 2 * d / n_keys + d * d / (n_queries * n_keys)
    return math.sqrt(var) / d


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_score_variance_is_d_and_scaled_variance_is_one(seed):
    n_queries, n_keys = 4000, 1024
    rows = attnviz.sqrt_d_law(dims=DIMS, n_queries=n_queries, n_keys=n_keys, seed=seed)
    assert [r.d for r in rows] == list(DIMS)
    for r in rows:
        tol = 4 * relative_standard_error(r.d, n_queries, n_keys)
        assert tol <= 0.10  # the sample is large enough for a 10% check to mean something
        assert abs(r.var_scores / r.d - 1) < tol, (r.d, r.var_scores)
        assert abs(r.var_scaled - 1) < tol, (r.d, r.var_scaled)
        assert r.var_scaled == pytest.approx(r.var_scores / r.d, rel=1e-12)


def test_unscaled_softmax_saturates_as_d_grows_scaled_does_not():
    n_keys = 64
    rows = attnviz.sqrt_d_law(dims=DIMS, n_queries=1000, n_keys=n_keys)
    max_raw = [r.max_weight_scores for r in rows]
    ent_raw = [r.entropy_scores for r in rows]
    assert all(a < b for a, b in zip(max_raw, max_raw[1:])), max_raw  # rises...
    assert max_raw[-1] > 0.85  # ...towards 1 (one key takes nearly everything)
    assert all(a > b for a, b in zip(ent_raw, ent_raw[1:])), ent_raw  # falls...
    assert ent_raw[-1] < 0.1 * math.log(n_keys)  # ...towards 0 (one-hot)

    max_scaled = [r.max_weight_scaled for r in rows]
    ent_scaled = [r.entropy_scaled for r in rows]
    assert max(max_scaled) - min(max_scaled) < 0.03, max_scaled  # roughly constant
    assert max(ent_scaled) - min(ent_scaled) < 0.05 * math.log(n_keys), ent_scaled
    assert min(ent_scaled) > 0.8 * math.log(n_keys)  # close to uniform over 64 keys
    for r in rows:
        assert r.entropy_scaled > r.entropy_scores and r.max_weight_scaled < r.max_weight_scores


def test_seed_003_numbers():
    """Seed 003: A, B ~ N(0, 1) of shape (10000, 64): var(A B^T) about 64, divided by sqrt(64) about 1."""
    (row,) = attnviz.sqrt_d_law(dims=(64,), n_queries=10000)
    assert row.d == 64
    assert 64 * 0.9 < row.var_scores < 64 * 1.1
    assert 0.9 < row.var_scaled < 1.1


def test_law_is_reproducible_and_seed_dependent():
    a = attnviz.sqrt_d_law(dims=(16,), n_queries=200, seed=5)
    b = attnviz.sqrt_d_law(dims=(16,), n_queries=200, seed=5)
    c = attnviz.sqrt_d_law(dims=(16,), n_queries=200, seed=6)
    assert a == b
    assert a[0].var_scores != c[0].var_scores


def test_scaled_module_scores_have_unit_variance_on_normal_inputs():
    """Our own attention function applies exactly that scale: Var(scaled) ~ 1 for N(0, 1) q and k."""
    d = 64
    q, k = attnviz.seeded_vectors(4000, d, seed=1), attnviz.seeded_vectors(1024, d, seed=2)
    _, stages = attnviz.attention(q, k, k)
    var_scores, var_scaled = float(stages.scores.var()), float(stages.scaled.var())
    tol = 4 * relative_standard_error(d, 4000, 1024)
    assert abs(var_scores / d - 1) < tol
    assert abs(var_scaled - 1) < tol
    np.testing.assert_allclose(stages.scaled.numpy(), stages.scores.numpy() / 8, rtol=1e-6)
