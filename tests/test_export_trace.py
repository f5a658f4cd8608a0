"""The whole trace as .npz with provenance, loaded back exactly; a view as one self-contained HTML file."""

from __future__ import annotations

import io
import json
import re

import numpy as np
import pytest
import torch
from helpers import array, make_trace

import attnviz
from attnviz import export
from attnviz.errors import InputError
from attnviz.plots import heatmaps
from attnviz.trace import AttentionTrace, LayerRecord, Provenance

TEXT = "The cat sat on the mat."


def _same_arrays(a: AttentionTrace, b: AttentionTrace) -> None:
    assert a.tokens == b.tokens and a.key_tokens == b.key_tokens and a.available_stages == b.available_stages
    for name in a.available_stages:
        assert np.array_equal(a.stage(name), b.stage(name)), name  # bit for bit, NaN-free stages
    if a.has("scores"):
        assert np.array_equal(a.mask, b.mask) and np.array_equal(a.scale, b.scale) and np.array_equal(a.fill, b.fill)


@pytest.fixture(scope="module")
def bundled_trace(bundled):
    return attnviz.trace(bundled, TEXT, pair="It was tired.", pad_to=16, causal=True, fill=float("-inf"))


def test_npz_of_a_pretrained_trace_loads_back_identical_with_its_provenance(bundled_trace):
    tr = bundled_trace
    data = export.trace_npz(tr, text=TEXT, pair="It was tired.")
    back = export.load_npz(data)
    _same_arrays(tr, back)
    assert back.provenance == tr.provenance  # model, revision, dtype, device, implementation, options, ids
    assert not back.notes or back.notes == tr.notes
    with np.load(io.BytesIO(data)) as z:
        # format 2: each layer's q, k and values (not the stages), the mask by its structure, shared by every layer
        assert z["q_0"].shape == z["k_0"].shape == z["values_0"].shape == (12, 16, 32)
        assert z["norms_0"].shape == (2, 12, 16) and z["mask_keys_0"].dtype == bool
        assert not {"scores", "weights", "mask", "mask_keys_1"} & set(z.files)
        rec = json.loads(str(z["provenance.json"]))
    assert rec["format"] == "attnviz-trace/2" and rec["masks"] == [{"ahead": 0, "behind": None}] + [{"same_as": 0}] * 5
    assert rec["text"] == TEXT and rec["input_ids"] == list(tr.provenance.input_ids)
    assert rec["attn_implementation"] and rec["revision"] == tr.provenance.revision
    assert rec["scale"] == pytest.approx([1 / np.sqrt(32)] * 6)
    assert dict((k, v) for k, v in rec["options"])["fill"] == float("-inf")
    assert {"attnviz", "torch", "transformers", "numpy"} <= set(rec["versions"])
    assert rec["versions"]["torch"] == torch.__version__.split("+")[0] or rec["versions"]["torch"] == torch.__version__


def test_npz_round_trip_keeps_bias_softcap_sinks_and_weights_only_traces():
    g = torch.Generator().manual_seed(5)
    s = torch.randn(2, 3, 4, 4, generator=g)
    mask = torch.ones(4, 4, dtype=torch.bool).tril()
    recs = (
        LayerRecord(None, None, 0.5, mask, -1e9, bias=torch.randn(1, 4, 4, generator=g), scores=s[0], softcap=2.0),
        LayerRecord(None, None, 0.25, mask, float("-inf"), scores=s[1], sinks=torch.randn(3, generator=g)),
    )
    tr = AttentionTrace(["a", "b", "c", "d"], layers=recs, provenance=Provenance("toy", options=(("hide", (1, 2)),)))
    back = export.load_npz(export.trace_npz(tr))
    _same_arrays(tr, back)
    assert back.layers[0].softcap == 2.0 and back.layers[1].bias is None
    assert back.provenance.options == (("hide", (1, 2)),)
    wo = make_trace(["x", "y", "z"], only_weights=True)
    back = export.load_npz(export.trace_npz(wo))
    assert not back.has("scores") and np.array_equal(back.weights, wo.weights)


def test_load_npz_refuses_other_files_with_a_clear_message():
    with pytest.raises(InputError, match="not an attnviz trace"):
        export.load_npz(b"not a zip")
    buf = io.BytesIO()
    np.savez(buf, weights=np.zeros((1, 1, 2, 2)))
    with pytest.raises(InputError, match="not an attnviz trace"):
        export.load_npz(buf.getvalue())


def test_file_names_name_the_page_model_and_layer():
    tr = make_trace(["a", "b"])
    assert export.trace_file_name(tr, "heads", "html", layer=3) == "attnviz_heads_synthetic_layer3.html"
    assert export.trace_file_name(tr, "export", "npz") == "attnviz_export_synthetic.npz"


def test_view_html_is_self_contained_with_the_data_and_the_provenance():
    tr = make_trace(["<b>x</b>", "y", "z"], n_layer=1, n_head=2)
    fig = heatmaps.head_grid(tr, 0, "weights")
    page = export.view_html([fig], "Heads <layer 0>", export.provenance_record(tr, text="<script>alert(1)</script>"))
    assert page.startswith("<!DOCTYPE html>") and "Heads &lt;layer 0&gt;" in page
    assert not re.search(r"<script[^>]*\bsrc=", page), "no external script: plotly.js is inline"
    assert "<script>alert(1)</script>" not in page and "&lt;script&gt;alert(1)" in page
    # the figure's data is in the file: its z values, as plotly serialises them
    spec = re.search(r'Plotly\.newPlot\(\s*"[^"]+",\s*(\[.*?\]),\s*\{', page, re.S)
    assert spec is not None
    z = array(json.loads(spec.group(1))[0]["z"])
    np.testing.assert_allclose(z, tr.layer(0).weights[0], atol=1e-7)
    assert '"paper_bgcolor":"#ffffff"' in page.replace(" ", "")


def test_a_quote_token_is_labelled_with_a_quote_in_the_html_export():
    tr = make_trace(['"', "b"], n_layer=1, n_head=1)
    page = export.view_html([heatmaps.head_detail(tr, 0, 0)], "q", export.provenance_record(tr))
    spec = re.search(r'Plotly\.newPlot\(\s*"[^"]+",\s*(\[.*?\]),\s*(\{.*?\}),\s*\{', page, re.S)
    layout = json.loads(spec.group(2))
    assert layout["xaxis"]["ticktext"] == ['00 "', "01 b"]
    assert "&quot;" not in spec.group(0)
