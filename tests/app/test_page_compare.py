"""The Compare page in AppTest: difference panels and the ranking equal numpy on the two traces."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import APP, figures, run_page, texts, z_arrays
from streamlit.testing.v1 import AppTest

import attnviz
from attnviz.analysis import compare as C
from attnviz.hf import bundled_model_path

PAGE = "app_pages/compare.py"
TEXT, OTHER = "The cat sat on the mat because it was tired.", "The dog sat on the mat because it was tired."


def page(**state):
    at = run_page(PAGE, text=TEXT, **state)
    assert not at.exception, [e.value for e in at.exception]
    return at


def _check(at, a, b):
    fig = figures(at)["diff_grid"]
    diff = b - a
    change = np.abs(diff).reshape(diff.shape[0], -1).mean(1)
    order = [int(h) for h in np.argsort(-change, kind="stable")]
    assert fig["layout"]["meta"]["order"] == order
    panels = fig["data"]
    r = np.abs(diff).max()
    assert panels[0]["zmin"] == -panels[0]["zmax"] and abs(panels[0]["zmax"] - r) < 1e-6  # explicit, centred
    assert panels[0]["zmid"] == 0 and panels[0]["colorscale"]
    for z, h in zip(z_arrays(fig), order):
        np.testing.assert_allclose(z, diff[h], atol=1e-6)
    table = at.dataframe[0].value
    assert list(table["head"]) == order


def test_minimal_pair_by_default(bundled):
    at = page(layer=3)
    a = attnviz.trace(bundled, TEXT).layer(3).weights.astype(np.float64)
    b = attnviz.trace(bundled, OTHER).layer(3).weights.astype(np.float64)
    _check(at, a, b)
    assert any("cat → dog" in c for c in texts(at, "caption"))
    assert any("**cat** swapped for **dog**" in c for c in texts(at, "caption"))  # b made from a, not a fixed text
    change = np.abs(b - a).reshape(12, -1).mean(1)
    titles = [t["text"] for t in figures(at)["diff_grid"]["layout"]["annotations"]]
    for title, h in zip(titles, np.argsort(-change, kind="stable")):
        value = float(title.rsplit("(", 1)[1].rstrip(")"))
        assert value == pytest.approx(change[h], rel=5e-3) and value > 0  # three significant digits, never "0.000"


def test_sentence_b_follows_a_new_sentence_a(bundled):
    text = "My friend gave his book to the teacher."
    at = run_page(PAGE, text=text, layer=1)
    assert not at.exception and not at.warning, [w.value for w in at.warning]
    b = attnviz.trace(bundled, "My friend gave her book to the teacher.")  # the only word with a swap: his -> her
    a = attnviz.trace(bundled, text)
    _check(at, a.layer(1).weights.astype(np.float64), b.layer(1).weights.astype(np.float64))


def test_sentences_of_different_lengths_say_why_not():
    at = page(cmp_text="The cat sat.")
    assert any("minimal pair" in w for w in texts(at, "warning"))
    assert "diff_grid" not in figures(at)


def test_two_layers(bundled):
    at = page(layer=1, cmp_mode="layers", cmp_layer=4)
    tr = attnviz.trace(bundled, TEXT)
    _check(at, tr.layer(1).weights.astype(np.float64), tr.layer(4).weights.astype(np.float64))
    assert "a = layer 1; b = layer 4." in texts(at, "caption")  # each side named once ("layer 1, layer 1" before)


def test_two_models_the_same_weights_give_zero(bundled):
    at = page(layer=2, cmp_mode="models", cmp_model=str(bundled_model_path()), cmp_measure="js")
    z = z_arrays(figures(at)["diff_grid"])
    assert len(z) == 12 and all(np.abs(x).max() < 1e-6 for x in z)
    assert np.allclose(at.dataframe[0].value["js"], 0, atol=1e-9)
    assert set(C.MEASURES) <= set(at.dataframe[0].value.columns)


def test_a_moved_window_draws_the_moved_tokens(bundled):
    """A text longer than 128 tokens: the frame's query and key windows (URL ids `queries`, `keys`) choose the cells."""
    long = " ".join(["The cat sat on the mat because it was tired, and the dog watched it from the door."] * 9)
    tr = attnviz.trace(bundled, long)
    assert tr.n_tokens > 128 + 40
    q0, k0 = tr.n_tokens - 128, 17
    at = AppTest.from_file(APP, default_timeout=300)
    for key, value in {"text": long, "layer": 1, "cmp_mode": "layers", "cmp_layer": 4}.items():
        at.session_state[key] = value
    at.query_params.update({"queries": [str(q0), str(q0 + 128)], "keys": [str(k0), str(k0 + 100)]})
    at.switch_page(PAGE).run()  # opened from a link
    assert not at.exception, [e.value for e in at.exception]
    assert at.slider(key="queries").value == (q0, q0 + 128) and at.slider(key="keys").value == (k0, k0 + 100)
    fig = figures(at)["diff_grid"]
    diff = tr.layer(4).weights.astype(np.float64) - tr.layer(1).weights.astype(np.float64)
    order = fig["layout"]["meta"]["order"]
    for z, h in zip(z_arrays(fig), order):
        np.testing.assert_allclose(z, diff[h, q0:, k0 : k0 + 100], atol=1e-6)
    panel = fig["data"][0]
    assert (panel["y0"], panel["x0"]) == (q0, k0)  # drawn at the tokens' own positions
    assert fig["layout"]["yaxis"]["ticktext"][0] == f"{q0:03d} {tr.tokens[q0]}"
    assert f"queries {q0}–{tr.n_tokens - 1}, keys {k0}–{k0 + 99}" in fig["layout"]["title"]["text"]


def test_two_models_of_different_head_counts_compare_each_layers_heads_averaged(tiny_bert_dir, tmp_path):
    import torch
    from transformers import AutoTokenizer, BertConfig, BertModel

    torch.manual_seed(5)
    wide = BertConfig.from_pretrained(tiny_bert_dir)
    narrow = BertConfig(**{**wide.to_dict(), "hidden_size": 16, "num_attention_heads": 2, "intermediate_size": 32})
    BertModel(narrow).save_pretrained(tmp_path, safe_serialization=True)  # 2 heads, width 16; the same tokenizer
    AutoTokenizer.from_pretrained(tiny_bert_dir).save_pretrained(tmp_path)
    text = "the cat sat on the mat"
    at = run_page(PAGE, text=text, source="hub", model=str(tiny_bert_dir), layer=1, cmp_mode="models",
                  cmp_model=str(tmp_path))  # fmt: skip
    assert not at.exception and not at.error, [e.value for e in (*at.exception, *at.error)]
    assert at.toggle(key="cmp_pool").value and at.toggle(key="cmp_pool").disabled  # 4 heads against 2: averaged
    a = attnviz.trace(attnviz.load_model(str(tiny_bert_dir)), text).layer(1).weights.mean(0)
    b = attnviz.trace(attnviz.load_model(str(tmp_path)), text).layer(1).weights.mean(0)
    (z,) = z_arrays(figures(at)["diff_grid"])
    np.testing.assert_allclose(z, b - a, atol=1e-6)  # one panel: b's heads averaged minus a's
    assert any("4 heads" in c and "2" in c for c in texts(at, "caption"))
