"""The Compare page in AppTest: difference panels and the ranking equal numpy on the two traces."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import figures, run_page, texts, z_arrays

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


def test_two_models_the_same_weights_give_zero(bundled):
    at = page(layer=2, cmp_mode="models", cmp_model=str(bundled_model_path()), cmp_measure="js")
    z = z_arrays(figures(at)["diff_grid"])
    assert len(z) == 12 and all(np.abs(x).max() < 1e-6 for x in z)
    assert np.allclose(at.dataframe[0].value["js"], 0, atol=1e-9)
    assert set(C.MEASURES) <= set(at.dataframe[0].value.columns)
