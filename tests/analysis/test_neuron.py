"""The neuron view: every number equals the trace's, sums of products equal the scores, and our module's
weights x values reproduce the module's real output."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import attnviz
from attnviz.analysis import neuron as N
from attnviz.errors import InputError
from attnviz.module.tracing import input_vectors


def test_numbers_equal_the_trace(bundled):
    tr = attnviz.trace(bundled, "The cat sat on the mat.", pad_to=10)
    v = N.neuron_view(tr, 2, 7, 3)
    stages = tr.layer(2)
    for name in ("scores", "scaled", "masked", "weights"):
        np.testing.assert_array_equal(getattr(v, name), getattr(stages, name)[7, 3], err_msg=name)
    np.testing.assert_array_equal(v.mask, tr.layer_mask(2)[3])
    assert not v.mask.all() and v.weights[~v.mask].max() == 0.0  # padding keys take nothing
    np.testing.assert_array_equal(v.q, tr.layers[2].q[7, 3].numpy())
    # the product summed over the head dimension is the dot product, in float64 from the stored vectors
    np.testing.assert_allclose(v.product.astype(np.float64).sum(-1), v.scores, rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(v.scaled, v.scores * v.scale, rtol=1e-6)
    assert v.scale == pytest.approx(1 / np.sqrt(32))


def test_grouped_query_keys_are_shared_out(tiny_llama, tiny_text):
    tr = attnviz.trace(tiny_llama, tiny_text)
    rec = tr.layers[1]
    assert rec.k.shape[0] == 2 and rec.q.shape[0] == 4
    for head in range(4):
        v = N.neuron_view(tr, 1, head, 5)
        np.testing.assert_array_equal(v.k, rec.k[head // 2].numpy())  # heads 0,1 share key head 0; 2,3 key head 1
        np.testing.assert_allclose(v.product.sum(-1), tr.layer(1).scores[head, 5], rtol=1e-5, atol=1e-5)
        assert not v.mask[6:].any()  # causal: a query sees no later key


def test_module_values_rebuild_the_module_output(bundled):
    src = attnviz.ModuleSource(bundled, d_model=48, n_head=4, inputs="random", seed=3)
    text = "A dog ran away."
    tr = attnviz.trace(src, text)
    module = src.build()
    x, _, _ = input_vectors(src, text)
    values = N.module_values(module, x)  # [head, key, d_head]
    query = 2
    heads = [N.neuron_view(tr, 0, h, query).with_values(values[h])[1] for h in range(4)]
    merged = torch.tensor(np.concatenate(heads), dtype=torch.float32)  # heads side by side, as merge_heads does
    with torch.no_grad():
        want = module(x)[0][query]
        got = module.w_o(merged)
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


def test_weights_only_traces_have_no_neuron_view():
    w = np.full((1, 1, 2, 2), 0.5)
    tr = attnviz.AttentionTrace.from_weights(["a", "b"], w)
    with pytest.raises(InputError, match="no query and key vectors"):
        N.neuron_view(tr, 0, 0, 0)
