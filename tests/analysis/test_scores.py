"""Score functions against plain numpy, pair by pair, and the scaling argument measured."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attnviz.analysis import scores as S


@pytest.fixture
def qkm():
    g = torch.Generator().manual_seed(0)
    q, k = torch.randn(5, 8, generator=g), torch.randn(7, 8, generator=g)
    return q, k, S.ScoreModule.seeded(8, hidden=6, seed=1)


def numpy_scores(name, q, k, m):
    q, k = q.double().numpy(), k.double().numpy()
    w, wq, wk, v = (t.double().numpy() for t in (m.w, m.w_q, m.w_k, m.v))
    out = np.zeros((len(q), len(k)))
    for i in range(len(q)):
        for j in range(len(k)):
            if name == "dot":
                out[i, j] = np.dot(q[i], k[j])
            elif name == "scaled_dot":
                out[i, j] = np.dot(q[i], k[j]) / np.sqrt(len(q[i]))
            elif name == "general":
                out[i, j] = q[i] @ w @ k[j]
            else:
                out[i, j] = v @ np.tanh(wq @ q[i] + wk @ k[j])
    return out


@pytest.mark.parametrize("name", S.SCORE_FUNCTIONS)
def test_each_score_function_equals_numpy(qkm, name):
    q, k, m = qkm
    np.testing.assert_allclose(m.scores(name, q, k).numpy(), numpy_scores(name, q, k, m), rtol=1e-5, atol=1e-5)


def test_weights_are_the_softmax_of_the_scores_and_respect_the_mask(qkm):
    q, k, m = qkm
    mask = torch.ones(5, 7, dtype=torch.bool)
    mask[:, 5:] = False
    for name, (_, w) in m.all(q, k, mask).items():
        e = np.exp(numpy_scores(name, q, k, m)[:, :5])
        np.testing.assert_allclose(w[:, :5].numpy(), e / e.sum(1, keepdims=True), rtol=1e-5, atol=1e-6)
        assert float(w[:, 5:].abs().max()) == 0.0


def test_batched_inputs_give_the_same_scores(qkm):
    q, k, m = qkm
    for name in S.SCORE_FUNCTIONS:
        batched = m.scores(name, torch.stack([q, q]), torch.stack([k, k]))
        torch.testing.assert_close(batched[1], m.scores(name, q, k))


def test_dot_products_spread_with_width_and_additive_scores_do_not():
    spread = S.spread_by_width(dims=(4, 64, 1024), n=64)
    dot, scaled, additive = (np.array(spread[n]) for n in ("dot", "scaled_dot", "additive"))
    np.testing.assert_allclose(dot / np.sqrt([4, 64, 1024]), 1.0, rtol=0.2)  # std of a sum of d unit products
    np.testing.assert_allclose(scaled, 1.0, rtol=0.2)
    assert additive.max() < 2 * additive.min()  # tanh bounds it: no growth with d
    assert np.all(np.abs(S.ScoreModule.seeded(1024).v.numpy()).sum() >= additive)  # |score| <= |v|_1


def test_unknown_score_function_is_refused(qkm):
    q, k, m = qkm
    with pytest.raises(ValueError, match="unknown score function"):
        m.scores("cosine", q, k)
