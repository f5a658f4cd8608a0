"""The Heads page in AppTest: every control changes the figures the way the page says it does.

Sidebar settings go in through session state before the first run (see helpers.run_page); page
widgets (stage, head) are set the same way so every test is one fresh, independent run.
"""

from __future__ import annotations

import numpy as np
import pytest
from helpers import click_cells, figures, heatmaps, run_page, texts, z_arrays

PAGE = "app_pages/heads.py"


def heads(**state):
    at = run_page(PAGE, **state)
    assert not at.exception, [e.value for e in at.exception]
    return at


@pytest.fixture(scope="module")
def default():
    return heads()


def test_default_view_shows_grid_detail_and_overview(default):
    at = default
    assert [t.value for t in at.title] == ["Heads"]
    figs = figures(at)
    assert set(figs) == {"head_grid", "head_detail", "who_reads", "overview"}
    grid = figs["head_grid"]
    assert len(heatmaps(grid)) == 12, "all-MiniLM-L6-v2 has 12 heads per layer"
    assert {(t["zmin"], t["zmax"]) for t in heatmaps(grid)} == {(0.0, 1.0)}
    z = z_arrays(grid)[0]
    assert z.shape == (13, 13)  # [CLS] the cat sat on the mat because it was tired . [SEP]
    np.testing.assert_allclose(z.sum(axis=1), 1.0, atol=1e-5)
    ticks = grid["layout"]["yaxis"]["ticktext"]
    assert ticks[1] == "01 the" and ticks[5] == "05 the"
    ov = figs["overview"]
    pts = next(t for t in ov["data"] if t["type"] == "scatter")
    assert len(pts["customdata"]) == 6 * 12 and pts["hoverinfo"] == "none"
    assert any(b.label == "Download CSV" for b in at.get("download_button"))
    assert any(b.label == "Download .npz" for b in at.get("download_button"))
    assert any("stages" in e.label for e in at.expander)
    stage_text = " ".join(texts(at, "markdown"))
    for name in ("**scores**", "**scaled**", "**masked**", "**weights**"):
        assert name in stage_text


def test_what_the_stages_mean_sits_above_the_stage_buttons_it_explains(default):
    order = [el.type for el in default.main]  # the page's elements top to bottom
    explained = next(i for i, el in enumerate(default.main) if el.type == "expander" and "stages" in el.label)
    assert "button_group" in order and explained < order.index("button_group"), order


def test_changing_the_layer_changes_the_grid(default):
    at = heads(layer=3)
    g0, g3 = figures(default)["head_grid"], figures(at)["head_grid"]
    assert g3["layout"]["meta"]["layer"] == 3
    assert not np.allclose(z_arrays(g0)[0], z_arrays(g3)[0])
    assert "Every head of layer 3" in [s.value for s in at.subheader]
    # the overview's tiles do not depend on the chosen layer; only the outline of the open tile moves
    o0, o3 = figures(default)["overview"], figures(at)["overview"]
    assert o3["data"] == o0["data"]
    assert len(o3["layout"]["shapes"]) == 1 and o3["layout"]["shapes"][0]["y0"] > o0["layout"]["shapes"][0]["y0"]


def test_stage_scores_is_signed_on_a_diverging_scale(default):
    at = heads(stage="scores", layer=2)
    grid = figures(at)["head_grid"]
    hm = heatmaps(grid)
    assert grid["layout"]["meta"]["stage"] == "scores"
    assert hm[0]["zmin"] == pytest.approx(-hm[0]["zmax"]) and hm[0]["zmax"] > 1
    weights_scale = heatmaps(figures(default)["head_grid"])[0]["colorscale"]
    assert hm[0]["colorscale"] != weights_scale and hm[0]["zmid"] == 0
    assert any((z < 0).any() for z in z_arrays(grid))
    detail = figures(at)["head_detail"]
    assert "scores %{" in click_cells(detail)["hovertemplate"]


def test_stage_masked_says_nothing_is_masked_here():
    at = heads(stage="masked")
    assert any("masked equals scaled" in c for c in texts(at, "caption"))
    assert figures(at)["head_grid"]["layout"]["meta"]["stage"] == "masked"


def test_head_picker_opens_that_head(default):
    at = heads(head=5, layer=1)
    detail = figures(at)["head_detail"]
    assert detail["layout"]["meta"] == {"figure": "head_detail", "layer": 1, "head": 5, "stage": "weights"}
    np.testing.assert_allclose(z_arrays(detail)[0], z_arrays(figures(at)["head_grid"])[5])
    assert not np.allclose(z_arrays(detail)[0], z_arrays(figures(default)["head_detail"])[0])


def test_changing_the_sentence_changes_the_token_axes():
    at = heads(text="Hello world")
    grid = figures(at)["head_grid"]
    assert z_arrays(grid)[0].shape == (4, 4)
    assert grid["layout"]["xaxis"]["ticktext"] == ["00 [CLS]", "01 hello", "02 world", "03 [SEP]"]


def test_markup_in_the_sentence_never_reaches_plotly_unescaped():
    at = heads(text="<img src=x onerror=alert(1)> <b>bold</b>")
    for fig in figures(at).values():
        assert "<img" not in str(fig) and "<b>bold" not in str(fig)


def test_our_module_as_source_shows_its_heads():
    at = heads(source="module", m_heads=4)
    figs = figures(at)
    assert len(heatmaps(figs["head_grid"])) == 4
    assert "overview" not in figs, "one layer: the overview would only repeat the grid"
    assert "Every head of our module (a single layer)" in [s.value for s in at.subheader]


def test_empty_sentence_explains_instead_of_failing():
    at = heads(text="   ")
    assert any("Type a sentence" in i for i in texts(at, "info"))
    assert not figures(at)


def test_weights_only_model_shows_only_the_weights_stage(tiny_xlnet_dir):
    at = heads(source="hub", model=str(tiny_xlnet_dir), stage="scores")
    assert any("only stage" in c for c in texts(at, "caption"))
    assert not at.get("button_group"), "no stage selector when there is one stage"
    figs = figures(at)
    assert figs["head_grid"]["layout"]["meta"]["stage"] == "weights"
    detail = click_cells(figs["head_detail"])
    assert "scores" not in detail["hovertemplate"]
    assert "unavailable" in figs["head_detail"]["layout"]["title"]["text"]


def test_a_relative_model_path_that_is_missing_says_where_it_looked():
    """A relative folder that does not exist is named as typed and said to be relative to the server's folder,
    without revealing that folder (a viewer must not learn the server's paths); the page falls back to the
    bundled model and keeps working."""
    import os

    at = heads(source="hub", model="./no-such-model")
    shown = " ".join(texts(at, "error") + texts(at, "warning"))
    assert "./no-such-model" in shown and "folder the server was started in" in shown, shown
    assert os.getcwd() not in shown and os.path.abspath("./no-such-model") not in shown, shown
    assert figures(at)["head_grid"]["layout"]["meta"]["layer"] == 0  # the bundled model still draws


def test_a_text_longer_than_the_limit_is_cut_and_the_page_says_so():
    from attnviz.ui.state import MAX_TEXT_CHARS

    at = heads(text="word " * (MAX_TEXT_CHARS // 4))
    assert any(f"first {MAX_TEXT_CHARS:,}" in i for i in texts(at, "info")), texts(at, "info")
    assert figures(at)["head_grid"]


def test_value_weighted_attention_is_drawn_beside_the_weights(default):
    """The stage picker offers value-weighted attention after weights; the grid draws value_share (0..1, rows of 1) and
    the head up close says what it is, citing Kobayashi et al. 2020; the overview pools it."""
    import attnviz
    from attnviz.analysis.values import value_share

    at = heads(stage="value-weighted", layer=1)
    picker = next(w for w in at.get("button_group") if w.proto.label == "Stage")
    assert list(picker.options) == ["scores", "scaled", "masked", "weights", "value-weighted"]
    assert picker.value == "value-weighted"
    figs = figures(at)
    grid, detail = figs["head_grid"], figs["head_detail"]
    assert grid["layout"]["meta"]["stage"] == "value-weighted" and figs["overview"]["layout"]["meta"]["stage"] == (
        "value-weighted"
    )
    assert {(t["zmin"], t["zmax"]) for t in heatmaps(grid)} == {(0.0, 1.0)}
    tr = attnviz.trace(attnviz.load_model(), "The cat sat on the mat because it was tired.")
    expected = value_share(tr, 1)
    for h, z in enumerate(z_arrays(grid)):
        np.testing.assert_allclose(z, expected[h], atol=1e-6)
    weights = z_arrays(figures(heads(layer=1))["head_grid"])[0]
    assert not np.allclose(z_arrays(grid)[0], weights, atol=1e-3)  # a different picture from the weights
    assert "Kobayashi et al. 2020" in detail["layout"]["title"]["text"]
    assert any("Kobayashi et al. 2020" in c for c in texts(at, "caption"))
