"""attnviz.trace: the record of one forward pass, its per-layer stages and its size."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

import attnviz
from attnviz import AttentionTrace, AttnvizError
from attnviz.trace import LayerRecord
from attnviz.trace import layers as trace_layers

TEXT = "The cat sat on the mat because it was tired."


def _arrays(L=2, H=3, T=4, seed=0):
    rng = np.random.default_rng(seed)
    return dict(tokens=list("abcd")[:T], scores=rng.normal(0, 3, (L, H, T, T)).astype(np.float32), scale=0.5)


def _softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def test_from_scores_derives_every_stage_like_numpy():
    a = _arrays()
    mask = np.ones((2, 4, 4), bool)
    mask[:, :, 3] = False
    tr = AttentionTrace.from_scores(a["tokens"], a["scores"], 0.5, mask, fill=-1e9)
    scaled = a["scores"].astype(np.float64) * 0.5
    masked = np.where(mask[:, None], scaled, -1e9)
    np.testing.assert_allclose(tr.scaled, scaled, rtol=1e-6)
    np.testing.assert_allclose(tr.masked, masked, rtol=1e-6)
    np.testing.assert_allclose(tr.weights, _softmax(masked), atol=1e-6)
    assert (tr.weights[..., 3] == 0).all() and tr.available_stages == attnviz.STAGES
    assert (tr.n_layer, tr.n_head, tr.n_tokens) == (2, 3, 4) and tr.scale.tolist() == [0.5, 0.5]


def test_grouped_query_keys_are_shared_by_consecutive_query_heads():
    g = torch.Generator().manual_seed(0)
    q, k = torch.randn(4, 5, 8, generator=g), torch.randn(2, 5, 8, generator=g)  # 4 query heads, 2 key heads
    rec = LayerRecord(q, k, 0.25, torch.ones(5, 5, dtype=torch.bool), -1e9)
    tr = AttentionTrace(list("abcde"), layers=(rec,))
    for h in range(4):  # heads 0, 1 use key head 0; heads 2, 3 key head 1
        expected = q[h].double() @ k[h // 2].double().T
        np.testing.assert_allclose(tr.layer(0).scores[h], expected.numpy(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("heads", [None, [3, 0]], ids=["every head", "two heads"])
def test_bfloat16_products_made_float32_a_block_at_a_time_are_the_float64_products(heads, monkeypatch):
    g = torch.Generator().manual_seed(1)
    q, k = torch.randn(4, 120, 8, generator=g).bfloat16(), torch.randn(2, 120, 8, generator=g).bfloat16()
    monkeypatch.setattr(trace_layers, "BLOCK", 2 * 8 * 8)  # blocks of 8 rows: many blocks on either side
    rec = LayerRecord(q, k, 0.25, torch.ones(120, 120, dtype=torch.bool).tril(), -1e9)
    tr = AttentionTrace([str(i) for i in range(120)], layers=(rec,))
    picked = range(4) if heads is None else heads
    exact = np.stack([(q[h].double() @ k[h // 2].double().T).numpy() for h in picked])  # bf16 products are exact
    for queries, keys in (((0, 120), (7, 8)), ((110, 120), (0, 120)), ((0, 120), (0, 120))):  # column, rows, all
        got = tr.stages(0, heads=heads, queries=queries, keys=keys).scores
        assert got.dtype == np.float32
        np.testing.assert_allclose(got, exact[:, slice(*queries), slice(*keys)], rtol=1e-5, atol=1e-5)


def test_one_head_and_a_window_of_queries_equal_the_full_layer():
    tr = AttentionTrace.from_scores(**_arrays(T=4))
    full = tr.layer(1)
    one = tr.stages(1, heads=2, queries=(1, 3))
    for name in attnviz.STAGES:
        np.testing.assert_allclose(getattr(one, name)[0], getattr(full, name)[2, 1:3], rtol=1e-6)


def test_rectangular_attention_has_its_own_key_tokens():
    q, k = torch.randn(2, 3, 4), torch.randn(2, 6, 4)  # 3 queries over 6 keys
    rec = LayerRecord(q, k, 0.5, torch.ones(3, 6, dtype=torch.bool), -1e9)
    tr = AttentionTrace(list("abc"), layers=(rec,), key_tokens=list("uvwxyz"))
    assert tr.weights.shape == (1, 2, 3, 6) and tr.n_keys == 6
    np.testing.assert_allclose(tr.weights.sum(-1), 1, rtol=1e-6)


def test_layer_arrays_are_read_only_and_fields_cannot_be_reassigned(bundled):
    tr = attnviz.trace(bundled, TEXT)
    for arr in (*tr.layer(0), tr.weights):
        with pytest.raises(ValueError, match="read-only"):
            arr[0] = 0
    with pytest.raises(dataclasses.FrozenInstanceError):
        tr.tokens = ("x",)


def test_stored_size_grows_linearly_with_the_tokens(bundled):
    short, long = attnviz.trace(bundled, "word " * 60), attnviz.trace(bundled, "word " * 240)
    ratio = long.nbytes / short.nbytes  # 4x the tokens: q, k and v grow 4x, the one shared mask 16x
    assert long.n_tokens / short.n_tokens == pytest.approx(3.9, abs=0.1)
    assert ratio < 6, ratio
    every_stage = 4 * long.weights.nbytes  # what storing the four stages of every layer would hold
    assert long.nbytes < every_stage / 8  # q, k, v: 3 x 32 numbers a token and head, against 4 x 242 stage cells


def test_weights_only_trace_has_only_the_weights_stage():
    w = np.full((1, 2, 3, 3), 1 / 3, np.float32)
    tr = AttentionTrace.from_attentions([torch.from_numpy(w)], list("abc"))
    assert not tr.has("scores") and tr.available_stages == ("weights",) and tr.scores is None
    np.testing.assert_array_equal(tr.weights[0], w[0])
    with pytest.raises(AttnvizError, match="only the final weights"):
        tr.stage("scores")
    with pytest.raises(AttnvizError, match="no scores to recompute"):
        tr.recompute(0, scale=1.0)


@pytest.mark.parametrize(
    "kw",
    [
        dict(tokens=list("abc")),  # 3 tokens for 4x4 scores
        dict(mask=np.ones((2, 4, 5), bool)),
        dict(scale=[0.5, 0.5, 0.5]),  # one scale per layer: 2, not 3
    ],
    ids=["tokens", "mask", "scale"],
)
def test_mismatched_shapes_raise_attnviz_error(kw):
    with pytest.raises((AttnvizError, ValueError)):
        AttentionTrace.from_scores(**{**_arrays(), **kw})


def test_a_trace_needs_records_or_weights_and_a_known_stage_name():
    with pytest.raises(AttnvizError, match="at least one layer"):
        AttentionTrace(list("ab"))
    with pytest.raises(AttnvizError, match="must be one of"):
        AttentionTrace.from_scores(**_arrays()).stage("probabilities")
    with pytest.raises(attnviz.InputError, match="0..1"):
        AttentionTrace.from_scores(**_arrays()).layer(2)


def test_recompute_changes_one_layer_only_and_leaves_the_record_alone():
    tr = AttentionTrace.from_scores(**_arrays())
    before = tr.weights.copy()
    hot = tr.recompute(0, scale=4.0)
    np.testing.assert_allclose(hot.weights, _softmax(tr.scores[0].astype(np.float64) * 4.0), atol=1e-6)
    np.testing.assert_array_equal(tr.weights, before)
