"""attnviz.analysis.sinks and .softcap against independent computations: the sink's share of each query (gpt-oss) against
transformers' eager attention and against the softmax written out in numpy from the recorded q, k and sink logits;
the scores before and after Gemma 2's softcapping against q.k x scale and cap x tanh(. / cap) in numpy, and the
capped scores against eager's weights; where the scale was applied, per family."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import attnviz
from attnviz.analysis.scale_site import scale_site
from attnviz.analysis.sinks import learned_sink_by_query
from attnviz.analysis.softcap import softcap_values
from tests.helpers import make_trace
from tests.hf import families as fm
from tests.tiny_families import build

TEXT = "the cat sat on the mat . a dog ran away"


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("sinks_softcap")
    return {kind: build(kind, root / kind) for kind in ("gpt_oss", "gemma2")}


@pytest.fixture(scope="module")
def traces(folders):
    return {kind: attnviz.trace(attnviz.load_model(str(f), device="cpu"), TEXT) for kind, f in folders.items()}


def _eager(folder, ids):
    with torch.no_grad():
        out = fm.eager_model(folder)(input_ids=torch.tensor([ids]), output_attentions=True, use_cache=False)
    return fm.stack_attentions(out.attentions)


def _logits(record, n_head):
    """q.k x scale in float64 from the recorded q and k (key heads repeated for grouped-query attention)."""
    q, k = record.q.double().numpy(), record.k.double().numpy()
    k = np.repeat(k, n_head // k.shape[0], axis=0)
    return q @ k.transpose(0, 2, 1) * record.scale


@pytest.mark.parametrize("layer", [0, 1])
def test_sink_share_is_what_eager_attention_leaves_out_of_each_row(layer, folders, traces):
    tr = traces["gpt_oss"]
    eager = _eager(folders["gpt_oss"], list(tr.provenance.input_ids))
    record = tr.layers[layer]
    logits = np.where(record.mask.dense().numpy(), _logits(record, tr.n_head), -np.inf)
    for head in range(tr.n_head):
        share = learned_sink_by_query(tr, layer, head)
        np.testing.assert_allclose(share, 1 - eager[layer, head].sum(-1, dtype=np.float64), rtol=0, atol=1e-5)
        sink = float(record.sinks[head])
        top = np.maximum(logits[head].max(-1), sink)
        by_hand = np.exp(sink - top) / (np.exp(logits[head] - top[:, None]).sum(-1) + np.exp(sink - top))
        np.testing.assert_allclose(share, by_hand, rtol=0, atol=1e-5)
        assert (share > 0).all() and (share < 1).all()


def test_softcap_values_are_the_scores_before_and_after_cap_tanh(folders, traces):
    tr, layer, head = traces["gemma2"], 1, 2
    record = tr.layers[layer]
    cap = softcap_values(tr, layer, head)
    assert cap.cap == 5.0 and cap.n_cells == int(record.mask.dense().sum()) == cap.before.size
    before = _logits(record, tr.n_head)[head]
    after = 5.0 * np.tanh(before / 5.0)
    visible = record.mask.dense().numpy()
    np.testing.assert_allclose(cap.before, before[visible], rtol=0, atol=1e-6)
    np.testing.assert_allclose(cap.after, after[visible], rtol=0, atol=1e-6)
    masked = np.where(visible, after, -np.inf)  # the capped scores are what the model's softmax used
    weights = np.exp(masked - masked.max(-1, keepdims=True))
    weights /= weights.sum(-1, keepdims=True)
    eager = _eager(folders["gemma2"], list(tr.provenance.input_ids))
    np.testing.assert_allclose(weights, eager[layer, head], rtol=0, atol=1e-5)
    few = softcap_values(tr, layer, head, limit=5)
    assert few.before.size == 5 and few.n_cells == cap.n_cells
    assert few.before[0] == cap.before[0] and few.before[-1] == cap.before[-1]
    assert set(few.before) <= set(cap.before)


def test_models_without_sinks_or_softcap_have_none(traces):
    assert learned_sink_by_query(traces["gemma2"], 0, 0) is None
    assert softcap_values(traces["gpt_oss"], 0, 0) is None
    wo = make_trace(["a", "b"], only_weights=True)
    assert learned_sink_by_query(wo, 0, 0) is None and softcap_values(wo, 0, 0) is None
    assert scale_site(wo, 0) is None


def test_the_scale_site_says_where_the_model_applied_the_scale(traces, tmp_path):
    assert "multiplies each dot product q·k by the scale (0.3536)" in scale_site(traces["gpt_oss"], 0)
    loaded = attnviz.load_model(str(fm.build("xglm", tmp_path / "xglm")), device="cpu")
    tr = attnviz.trace(loaded, fm.TEXT)
    assert tr.scale_on[0] == "q"
    assert "multiplies q by the scale (0.3536) before the dot product" in scale_site(tr, 0)
