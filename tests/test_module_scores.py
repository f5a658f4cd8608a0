"""Our MultiHeadAttention with each score function (dot, scaled_dot, general, additive), against an independent
numpy computation written here with explicit loops over heads, queries and keys; scaled_dot stays the default and
keeps its parity with torch.nn.MultiheadAttention."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import attnviz
from attnviz import ModuleSource, MultiHeadAttention, seeded_module
from attnviz.attention import SCORE_FUNCTIONS, additive_scores
from attnviz.errors import AttnvizError, InputError


def np_score(kind: str, q: np.ndarray, k: np.ndarray, params: dict, h: int) -> float:
    """One head's score of one query vector q and one key vector k, from the formula (float64)."""
    if kind in ("dot", "scaled_dot"):
        return float(sum(a * b for a, b in zip(q, k)))
    if kind == "general":
        return float(q @ params["w"][h] @ k)
    hidden = np.tanh(params["w_q"][h] @ q + params["w_k"][h] @ k)
    return float(params["v"][h] @ hidden)


def np_forward(m: MultiHeadAttention, x: np.ndarray, kind: str, mask: np.ndarray | None = None):
    """(scores [nh, T, T], weights [nh, T, T], output [T, d]) for one unbatched sequence x [T, d]."""
    p = {name: t.detach().double().numpy() for name, t in m.state_dict().items()}
    params = {n.split(".")[-1]: v for n, v in p.items() if n.startswith("score_fn.")}
    lin = lambda y, name: y @ p[f"{name}.weight"].T + p.get(f"{name}.bias", 0.0)  # noqa: E731
    T, d = x.shape
    nh, hd = m.n_head, d // m.n_head
    Q, K, V = (lin(x, n).reshape(T, nh, hd) for n in ("w_q", "w_k", "w_v"))
    scores = np.array([[[np_score(kind, Q[i, h], K[j, h], params, h) for j in range(T)] for i in range(T)]
                       for h in range(nh)])  # fmt: skip
    scale = 1 / math.sqrt(hd) if kind == "scaled_dot" else 1.0
    z = np.where(mask, scores * scale, -np.inf) if mask is not None else scores * scale
    e = np.exp(z - z.max(-1, keepdims=True))
    weights = e / e.sum(-1, keepdims=True)
    heads = np.stack([weights[h] @ V[:, h] for h in range(nh)], axis=1)  # [T, nh, hd]
    return scores, weights, lin(heads.reshape(T, d), "w_o")


@pytest.mark.parametrize("kind", SCORE_FUNCTIONS)
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_each_score_function_equals_the_numpy_formula(kind, causal):
    m = seeded_module(12, 3, seed=4, score=kind)
    x = torch.randn(7, 12, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        out, st = m(x, causal=causal)
    mask = np.tril(np.ones((7, 7), bool)) if causal else None
    scores, weights, output = np_forward(m, x.double().numpy(), kind, mask)
    np.testing.assert_allclose(st.scores.numpy(), scores, atol=1e-5, rtol=1e-5)
    np.testing.assert_allclose(st.weights.numpy(), weights, atol=1e-6)
    np.testing.assert_allclose(out.numpy(), output, atol=1e-5)
    np.testing.assert_allclose(st.weights.sum(-1).numpy(), 1.0, atol=1e-6)


@pytest.mark.parametrize("kind", SCORE_FUNCTIONS)
def test_one_heads_scores_alone_equal_the_formula_and_that_head_of_forward(kind):
    m = seeded_module(12, 3, seed=4, score=kind)
    x = torch.randn(7, 12, generator=torch.Generator().manual_seed(1))
    scores, _, _ = np_forward(m, x.double().numpy(), kind)
    with torch.no_grad():
        q, k, _ = m.project(x[None], x[None], x[None])  # [1, head, token, d_head]
        _, st = m(x)
        for h in range(3):
            alone = m.score_fn.of_head(h, q[0, h], k[0, h]).numpy()
            np.testing.assert_allclose(alone, scores[h], atol=1e-5, rtol=1e-5)
            np.testing.assert_allclose(alone, st.scores[h].numpy(), atol=1e-6)
        with pytest.raises(AttnvizError, match="Head 3 does not exist"):
            m.score_fn.of_head(3, q[0, 0], k[0, 0])


def test_scaled_dot_is_the_default_and_still_equals_torch_multihead_attention():
    torch.manual_seed(0)
    ref = torch.nn.MultiheadAttention(16, 4, batch_first=True).eval()
    ours = MultiHeadAttention.from_torch(ref)
    assert ours.score == "scaled_dot" and dict(ours.score_fn.named_parameters()) == {}
    x = torch.randn(2, 5, 16)
    with torch.no_grad():
        want, w_want = ref(x, x, x, need_weights=True, average_attn_weights=False)
        got, st = ours(x)
    torch.testing.assert_close(got, want, atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(st.weights, w_want, atol=1e-6, rtol=1e-5)


def test_dot_and_scaled_dot_share_scores_and_differ_by_the_scale():
    x = torch.randn(6, 32, generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        _, dot = seeded_module(32, 2, seed=3, score="dot")(x)
        _, scaled = seeded_module(32, 2, seed=3)(x)
    torch.testing.assert_close(dot.scores, scaled.scores)
    torch.testing.assert_close(dot.scaled, scaled.scaled * math.sqrt(16))  # d_head = 16
    # the unscaled softmax is sharper: its rows' largest weight is larger on average
    assert dot.weights.amax(-1).mean() > scaled.weights.amax(-1).mean()


def test_score_parameters_are_seeded_and_leave_the_global_rng_alone():
    state = torch.random.get_rng_state()
    a, b, c = (seeded_module(8, 2, seed=s, score="additive") for s in (5, 5, 6))
    assert torch.equal(torch.random.get_rng_state(), state)
    assert torch.equal(a.score_fn.v, b.score_fn.v) and not torch.equal(a.score_fn.v, c.score_fn.v)
    plain = seeded_module(8, 2, seed=5)  # the projections do not depend on the score function
    assert torch.equal(a.w_q.weight, plain.w_q.weight) and torch.equal(a.w_o.bias, plain.w_o.bias)
    assert a.score_fn.w_q.shape == (2, 4, 4) and a.score_fn.v.shape == (2, 4)
    assert seeded_module(8, 2, score="general").score_fn.w.shape == (2, 4, 4)


def test_additive_scores_in_blocks_equal_all_at_once():
    g = torch.Generator().manual_seed(0)
    q, k = torch.randn(2, 9, 4, generator=g), torch.randn(2, 7, 4, generator=g)
    w_q, w_k, v = torch.randn(2, 5, 4, generator=g), torch.randn(2, 5, 4, generator=g), torch.randn(2, 5, generator=g)
    whole = additive_scores(q, k, w_q, w_k, v)
    torch.testing.assert_close(additive_scores(q, k, w_q, w_k, v, chunk=1), whole)
    torch.testing.assert_close(additive_scores(q, k, w_q, w_k, v, chunk=2 * 7 * 5 * 2), whole)


def test_an_unknown_score_function_is_refused_clearly(bundled):
    with pytest.raises(InputError, match="score function must be one of"):
        MultiHeadAttention(8, 2, score="cosine")
    with pytest.raises(InputError, match="score must be one of"):
        ModuleSource(bundled, inputs="random", score="cosine").build()


@pytest.mark.parametrize("kind", SCORE_FUNCTIONS)
def test_the_traced_module_shows_what_forward_computes(bundled, kind):
    src = ModuleSource(bundled, d_model=16, n_head=2, inputs="random", seed=3, score=kind)
    text = "The cat sat on the mat."
    tr = attnviz.trace(src, text)
    x, _, _ = attnviz.module.tracing.input_vectors(src, text)
    with torch.no_grad():
        _, st = src.build()(x)
    np.testing.assert_allclose(tr.layer(0).scores, st.scores.numpy(), atol=1e-5)
    np.testing.assert_allclose(tr.layer(0).weights, st.weights.numpy(), atol=1e-6)
    assert tr.scale[0] == pytest.approx(1 / math.sqrt(8) if kind == "scaled_dot" else 1.0)
    assert (kind == "scaled_dot") == ("scores" not in tr.model_name)  # the description names a non-default score
    copied = ModuleSource(bundled, weights="pretrained", inputs="hidden", score=kind)
    assert copied.mirrors_layer == (kind == "scaled_dot")  # only the model's own score reproduces the layer
