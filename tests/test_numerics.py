"""Numerics: every stage shown is finite or explicitly masked, whatever the weights, dtype or scale."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import attnviz
from attnviz.attention import MAX_SCALE


def assert_stages_sane(tr):
    for name in ("scores", "scaled", "weights"):
        assert np.isfinite(tr.stage(name)).all(), name
    masked = tr.masked
    visible = np.broadcast_to(tr.mask[:, None], masked.shape)
    assert np.isfinite(masked[visible]).all()  # only masked cells may hold the fill (-inf included)
    rows = tr.weights.sum(-1)
    assert np.allclose(rows[tr.mask.any(-1)[:, None].repeat(tr.n_head, 1)], 1, atol=1e-5)


def test_a_half_precision_checkpoint_is_loaded_and_traced_in_float32(tiny_bert_dir, tmp_path):
    from transformers import AutoModel

    half = tmp_path / "fp16"
    m = AutoModel.from_pretrained(tiny_bert_dir)
    m.to(torch.float16).save_pretrained(half)
    for f in tiny_bert_dir.iterdir():
        if "token" in f.name or f.name == "vocab.txt":
            (half / f.name).write_bytes(f.read_bytes())
    loaded = attnviz.load_model(str(half))
    assert all(p.dtype == torch.float32 for p in loaded.model.parameters())
    tr = attnviz.trace(loaded, "the cat sat on the mat")
    assert tr.weights.dtype == np.float32 and tr.scores.dtype == np.float32
    assert_stages_sane(tr)


def test_huge_scores_never_overflow_to_inf_or_nan(tiny_bert_dir):
    """Query/key weights x 1000 make scores around 1e5: softmax must still be exact one-hots, not NaN."""
    loaded = attnviz.load_model(str(tiny_bert_dir))
    layer0 = loaded.attention_modules[0]
    with torch.no_grad():
        layer0.query.weight.mul_(1000)
        layer0.key.weight.mul_(1000)
    try:
        tr = attnviz.trace(loaded, "the cat sat on the mat")
        assert np.abs(tr.scores[0]).max() > 1e4
        assert_stages_sane(tr)
        assert tr.weights[0].max(-1).min() > 0.5  # saturated, as huge scores should make it
    finally:
        with torch.no_grad():
            layer0.query.weight.div_(1000)
            layer0.key.weight.div_(1000)


@pytest.mark.parametrize("fill", [-10000.0, -1e9, float("-inf"), None])
def test_every_fill_with_hidden_and_causal_keys_keeps_stages_finite(bundled, fill):
    tr = attnviz.trace(bundled, "The cat sat on the mat.", causal=True, hide=[0, 3], fill=fill, pad_to=12)
    assert_stages_sane(tr)


@pytest.mark.parametrize("scale", [0.0, 1e5, -1e9, float("nan")])
def test_scales_that_would_overflow_or_mean_nothing_are_refused(bundled, scale):
    with pytest.raises(attnviz.InputError, match="scale"):
        attnviz.trace(bundled, "The cat sat.", scale=scale)
    tr = attnviz.trace(bundled, "The cat sat.")
    with pytest.raises(attnviz.InputError, match="scale"):
        tr.recompute(0, scale=scale)


def test_the_largest_allowed_scale_still_gives_finite_stages(bundled):
    tr = attnviz.trace(bundled, "The cat sat on the mat.", scale=MAX_SCALE)
    assert_stages_sane(tr)
    st = tr.recompute(2, scale=-MAX_SCALE)
    assert np.isfinite(st.scaled).all() and np.isfinite(st.weights).all()
