"""The Neuron view page in AppTest: the vectors and the table equal the trace; values only for our module."""

from __future__ import annotations

import json

import numpy as np
from helpers import array, figures, run_page, texts

import attnviz
from attnviz.analysis import neuron as N
from attnviz.analysis.values import value_norms

PAGE = "app_pages/neuron.py"
TEXT = "The cat sat on the mat."


def page(**state):
    at = run_page(PAGE, text=TEXT, **state)
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_pretrained_view_equals_the_trace_and_shows_weights_times_values(bundled):
    tr = attnviz.trace(bundled, TEXT)
    at = page(layer=3, head=4, nv_query=2)
    fig = figures(at)["neuron_vectors"]
    q, k, prod = (array(t["z"]) for t in fig["data"])
    want = N.neuron_view(tr, 3, 4, 2)
    np.testing.assert_array_equal(q[0], want.q)
    np.testing.assert_array_equal(k, want.k)
    np.testing.assert_array_equal(prod, want.product)
    table = at.dataframe[0].value
    np.testing.assert_array_equal(table["weight"].to_numpy(np.float32), tr.layer(3).weights[4, 2])
    np.testing.assert_array_equal(table["q·k (scores)"].to_numpy(np.float32), tr.layer(3).scores[4, 2])
    # a pretrained model's values are kept now: per key ||v W_O|| and weight x ||v W_O|| (Kobayashi et al. 2020)
    np.testing.assert_allclose(table["weight × ‖v W_O‖"].to_numpy(), value_norms(tr, 3)[4, 2], rtol=1e-6)
    np.testing.assert_allclose(table["‖v W_O‖"].to_numpy(), tr.output_norms(3)[4], rtol=1e-6)
    assert any("Kobayashi et al. 2020" in c for c in texts(at, "caption"))
    assert len(at.dataframe) == 2 and not texts(at, "info")
    vals = at.dataframe[1].value
    v = np.stack([vals[c].to_numpy() for c in vals.columns if c.startswith("v of")])
    np.testing.assert_allclose(v, tr.values(3, 4), atol=1e-7)


def test_our_module_shows_weights_times_values(bundled):
    at = page(source="module", m_inputs="random", m_dmodel=16, m_heads=2, head=1, nv_query=1)
    assert len(at.dataframe) == 2
    table, vals = at.dataframe[0].value, at.dataframe[1].value
    w = table["weight"].to_numpy()
    v = np.stack([vals[c].to_numpy() for c in vals.columns if c.startswith("v of")])
    np.testing.assert_allclose(vals["output (sum of weight × v)"].to_numpy(), (w[:, None] * v).sum(0), atol=1e-6)
    np.testing.assert_allclose(table["|weight × v|"].to_numpy(), np.linalg.norm(w[:, None] * v, axis=-1), atol=1e-6)
    assert json.dumps(texts(at, "info")).count("Our module") == 0


def test_weights_only_models_say_why(tiny_xlnet_dir):
    at = run_page(PAGE, text="the cat sat", source="hub", model=str(tiny_xlnet_dir))
    assert not at.exception
    assert any("only the final weights" in s for s in texts(at, "info"))
