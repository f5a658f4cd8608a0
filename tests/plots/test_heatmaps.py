"""Pure figure tests for attnviz.plots.heatmaps: built from synthetic traces, no model, no Streamlit."""

from __future__ import annotations

import json

import numpy as np
import plotly.graph_objects as go
import pytest
from helpers import make_trace

from attnviz import ui
from attnviz.errors import AttnvizError
from attnviz.plots import heatmaps as hm
from attnviz.plots.common import chart_config, short_label

XSS = ["<b>x</b>", "<img src=x onerror=alert(1)>", "the", "the", "&amp;", "<br>"]


@pytest.fixture(scope="module")
def trace():
    return make_trace(XSS, n_layer=2, n_head=5, causal=True)


def heat(fig: go.Figure) -> list[go.Heatmap]:
    return [t for t in fig.data if isinstance(t, go.Heatmap)]


def cells(fig: go.Figure):
    """The one-head view's click targets, which carry its hover: (the trace, its numbers as [query, key, value])."""
    (t,) = [t for t in fig.data if t.name == hm.CELLS]
    rows, cols = np.shape(heat(fig)[0].z)
    return t, np.asarray(t.customdata, dtype=np.float64).reshape(rows, cols, -1)


def hover_names(fig: go.Figure, q: int, k: int) -> tuple[str, str]:
    """The (query, key) names the one-head view's hover shows for cell (q, k): Plotly labels a value on an axis with
    array ticks by that tick's text, and the targets' own axes (plots.clickable.TARGET_AXES) tick every position."""
    xa, ya = fig.layout.xaxis2, fig.layout.yaxis2
    return ya.ticktext[list(ya.tickvals).index(q)], xa.ticktext[list(xa.tickvals).index(k)]


def all_strings(fig: go.Figure) -> list[tuple[str, str]]:
    """(key, string) for every string anywhere in the figure's JSON (labels, titles, customdata, hover)."""
    out = []

    def walk(x, key):
        if isinstance(x, str):
            out.append((key, x))
        elif isinstance(x, dict):
            for k, v in x.items():
                walk(v, k)
        elif isinstance(x, list):
            for v in x:
                walk(v, key)

    walk(json.loads(fig.to_json()), "")
    return out


# --- head grid ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("stage", ["scores", "scaled", "masked", "weights"])
def test_grid_has_one_heatmap_per_head_and_one_shared_scale(trace, stage):
    fig = hm.head_grid(trace, 1, stage)
    traces = heat(fig)
    assert len(traces) == trace.n_head
    assert len({(t.zmin, t.zmax) for t in traces}) == 1, "every head must share the colour range"
    assert len({t.colorscale for t in traces}) == 1
    assert sum(bool(t.showscale) for t in traces) == 1, "one colour bar for the whole grid"
    assert [a.text for a in fig.layout.annotations][: trace.n_head] == [f"head {h}" for h in range(trace.n_head)]
    assert all(t.z.dtype == np.float32 for t in traces)


def test_grid_weights_are_0_to_1_and_scores_are_symmetric_around_0(trace):
    w = heat(hm.head_grid(trace, 0, "weights"))[0]
    assert (w.zmin, w.zmax) == (0.0, 1.0)
    s = heat(hm.head_grid(trace, 0, "scores"))
    top = float(np.abs(trace.scores[0]).max())
    assert s[0].zmin == pytest.approx(-top) and s[0].zmax == pytest.approx(top)
    assert s[0].zmid == 0.0
    assert s[0].colorscale != w.colorscale, "score stages need a diverging scale, weights a sequential one"
    assert any((t.z < 0).any() for t in s)


def test_grid_cols_and_rows(trace):
    fig = hm.head_grid(trace, 0, cols=2)
    # 5 heads in 2 columns -> 3 rows; the last heatmap sits in row 3, column 1
    assert heat(fig)[-1].xaxis == "x5" and len(heat(fig)) == 5
    assert fig.layout.height > hm.head_grid(trace, 0, cols=5).layout.height


def test_tick_labels_keep_repeated_tokens_apart(trace):
    fig = hm.head_grid(trace, 0)
    ax = fig.layout.yaxis
    assert ax.type == "category" and list(ax.categoryarray) == list(ax.tickvals), "category i is token i"
    assert ax.ticktext[2] != ax.ticktext[3] and "the" in ax.ticktext[2] and "the" in ax.ticktext[3]
    assert len(set(ax.ticktext)) == trace.n_tokens
    detail = hm.head_detail(trace, 0, 0)
    assert list(detail.layout.xaxis.ticktext) == list(ax.ticktext)


FIGURES = {
    "grid": lambda t: hm.head_grid(t, 0, "masked"),
    "detail-scores": lambda t: hm.head_detail(t, 0, 1, "scores"),
    "detail-weights": lambda t: hm.head_detail(t, 1, 4, "weights"),
    "overview": lambda t: hm.overview(t, "weights", selected=(1, 2)),
}


@pytest.mark.parametrize("name", FIGURES)
def test_markup_in_tokens_is_escaped_everywhere(trace, name):
    strings = all_strings(FIGURES[name](trace))
    for key, text in strings:
        assert "<img" not in text and "<b>x" not in text, (key, text)
        if key not in ("hovertemplate", "text"):  # our own templates and titles may hold <br>, <sup>, <extra>
            assert "<" not in text and ">" not in text, (key, text)
    if name != "overview":  # the overview shows no tokens at all
        assert any(text.endswith("&lt;img·src=x·onerror=alert(1)&gt;") for _, text in strings)
        assert any(text.endswith("&lt;br&gt;") for _, text in strings)


def test_escaped_tokens_reach_labels_and_hover(trace):
    fig = hm.head_detail(trace, 0, 0)
    ticks = list(fig.layout.xaxis.ticktext)
    assert ticks[0] == "00 &lt;b&gt;x&lt;/b&gt;"
    assert ticks[4].endswith("&amp;amp;")
    query, key = hover_names(fig, 1, 0)
    assert query.endswith("&lt;img·src=x·onerror=alert(1)&gt;")  # the hover names the whole token, escaped
    assert ticks[1] == short_label(query) == "01 &lt;img·src=x·onerro…"  # the axis a cut of it
    assert key == ticks[0]  # [query, key] of row 1, column 0
    assert "query %{y}" in cells(fig)[0].hovertemplate and "key %{x}" in cells(fig)[0].hovertemplate


def test_a_quote_token_is_labelled_with_a_quote_not_an_entity():
    # Plotly decodes &lt; &gt; &amp; but shows &quot; literally: a typed " must reach the label as "
    fig = hm.head_detail(make_trace(['"', "it's", "<q>"], n_layer=1, n_head=1), 0, 0)
    spec = json.loads(fig.to_json())
    assert spec["layout"]["xaxis"]["ticktext"] == ['00 "', "01 it's", "02 &lt;q&gt;"]
    assert "&quot;" not in fig.to_json() and "&#x27;" not in fig.to_json()


def test_masked_cells_are_nan_in_the_masked_stage(trace):
    allowed = trace.mask[0]
    for fig in (hm.head_grid(trace, 0, "masked"), hm.head_detail(trace, 0, 2, "masked")):
        for t in heat(fig):
            assert np.isnan(t.z[~allowed]).all()
            assert np.isfinite(t.z[allowed]).all()
            assert t.hoverongaps is False
    # other stages keep every value: scores exist for masked pairs, weights are exactly 0 there
    w = heat(hm.head_grid(trace, 0, "weights"))[0].z
    assert np.isfinite(w).all() and (w[~allowed] == 0).all()
    assert np.isfinite(heat(hm.head_grid(trace, 0, "scaled"))[0].z).all()


def test_detail_hover_shows_every_stage(trace):
    fig = hm.head_detail(trace, 1, 3, "scaled")
    t, custom = cells(fig)
    assert t.hovertemplate.endswith("<extra></extra>")
    for word in ("query %{", "key %{", "weights %{", "scores %{", "scaled %{"):
        assert word in t.hovertemplate
    q, k = 4, 2
    assert "weights %{customdata[0]:.4~g}" in t.hovertemplate  # numbers formatted by Plotly, 4 significant digits
    assert float(custom[q, k, 0]) == pytest.approx(trace.weights[1, 3, q, k], rel=1e-6)
    assert float(custom[q, k, 1]) == pytest.approx(trace.scores[1, 3, q, k], rel=1e-6)
    assert float(custom[q, k, 2]) == pytest.approx(trace.scaled[1, 3, q, k], rel=1e-6)
    assert np.asarray(t.customdata).dtype == np.float32  # one typed array, not a string per cell
    np.testing.assert_allclose(heat(fig)[0].z, trace.scaled[1, 3])
    assert "head 3" in fig.layout.title.text and "Layer 1" in fig.layout.title.text


def test_detail_of_a_weights_only_trace_says_scores_are_unavailable():
    tr = make_trace(["a", "b", "c"], only_weights=True)
    fig = hm.head_detail(tr, 0, 0)
    t, custom = cells(fig)
    assert "scores" not in t.hovertemplate and "weights %{" in t.hovertemplate
    assert custom.shape == (3, 3, 1)  # the weights alone
    assert "unavailable" in fig.layout.title.text
    assert len(heat(hm.head_grid(tr, 1))) == tr.n_head
    with pytest.raises(AttnvizError):
        hm.head_grid(tr, 0, "scores")


def test_detail_uses_the_layer_colour_range(trace):
    grid = heat(hm.head_grid(trace, 0, "scores"))[0]
    one = heat(hm.head_detail(trace, 0, 1, "scores"))[0]
    assert (one.zmin, one.zmax) == (grid.zmin, grid.zmax)


# --- long texts ---------------------------------------------------------------------------------------


def test_long_texts_are_windowed_to_keep_payloads_small():
    tr = make_trace([f"w{i}" for i in range(200)], n_layer=1, n_head=2)
    fig = hm.head_grid(tr, 0)
    assert heat(fig)[0].z.shape == (hm.MAX_SHOWN, hm.MAX_SHOWN)
    assert "of 200" in fig.layout.title.text
    assert len(fig.layout.xaxis.tickvals) <= hm.MAX_TICKS
    zoom = hm.head_detail(tr, 0, 1, token_range=(150, 190))
    t = heat(zoom)[0]
    assert t.z.shape == (40, 40) and t.x0 == 150 and t.y0 == 150
    # a window of keys is computed alone, its weights from each row's log-sum-exp: float32 rounding apart, the same
    np.testing.assert_allclose(t.z, tr.weights[0, 1, 150:190, 150:190], rtol=2e-6, atol=1e-9)
    assert zoom.layout.xaxis.ticktext[0].startswith("150 ")
    assert hm.window(200, (190, 500)) == (190, 200)
    assert hm.window(200, (0, 500)) == (0, hm.MAX_SHOWN)
    assert len(fig.to_json()) < 600_000


def test_overview_of_a_long_text_pools_every_head_into_a_small_tile():
    tr = make_trace([f"w{i}" for i in range(300)], n_layer=2, n_head=2)
    fig = hm.overview(tr)
    z = heat(fig)[0].z
    assert z.dtype == np.float32 and z.shape == (2 * (hm.TILE + 1) - 1, 2 * (hm.TILE + 1) - 1)
    # pooled weights: each row of a tile is the attention a block of queries gives to each block of keys
    tile = z[: hm.TILE, : hm.TILE]
    np.testing.assert_allclose(tile.sum(axis=1), 1.0, atol=1e-5)
    assert np.nanmin(z) >= 0 and np.nanmax(z) <= 1
    scores = heat(hm.overview(tr, "scores"))[0].z[: hm.TILE, : hm.TILE]
    assert scores.mean() == pytest.approx(tr.scores[0, 0].mean(), rel=0.05), "scores are averaged, not summed"
    assert len(fig.to_json()) < 100_000


# --- overview and clicks ------------------------------------------------------------------------------


def test_overview_has_one_clickable_point_per_layer_and_head(trace):
    fig = hm.overview(trace, "weights", selected=(1, 3))
    assert len(heat(fig)) == 1, "one image for every tile draws fast"
    pts = [t for t in fig.data if isinstance(t, go.Scatter)]
    assert len(pts) == 1
    p = pts[0]
    assert len(p.x) == len(p.y) == trace.n_layer * trace.n_head
    assert sorted(map(tuple, p.customdata)) == [(lay, h) for lay in range(trace.n_layer) for h in range(trace.n_head)]
    assert p.hoverinfo == "none" and p.marker.symbol == "square"
    assert p.marker.color == "rgba(0,0,0,0)"
    assert len(fig.layout.shapes) == 1, "the open tile is outlined"
    assert list(fig.layout.xaxis.ticktext) == [str(h) for h in range(trace.n_head)]


def test_overview_masked_stage_keeps_masked_cells_as_gaps(trace):
    z = heat(hm.overview(trace, "masked"))[0].z
    tile = z[: trace.n_tokens, : trace.n_tokens]  # layer 0, head 0
    assert np.isnan(tile[~trace.mask[0]]).all() and np.isfinite(tile[trace.mask[0]]).all()


def test_selected_tile_reads_streamlit_selection_events():
    # what st.plotly_chart(on_select=...) stores after a click on a marker, as seen in the browser:
    # customdata made from a numpy array arrives as {"0": layer, "1": head}; plain lists stay lists
    event = {
        "selection": {
            "points": [
                {
                    "curve_number": 1,
                    "point_number": 55,
                    "point_index": 55,
                    "x": 104,
                    "y": 62,
                    "customdata": {"0": 4, "1": 7},
                }
            ],
            "point_indices": [55],
            "box": [],
            "lasso": [],
        }
    }
    assert ui.selected_tile(event) == (4, 7)
    event["selection"]["points"][0]["customdata"] = [2, 11]
    assert ui.selected_tile(event) == (2, 11)
    # a click on the heatmap underneath carries no customdata; empty and missing selections give None
    assert ui.selected_tile({"selection": {"points": [{"curve_number": 0, "x": 1, "y": 2}]}}) is None
    assert ui.selected_tile({"selection": {"points": [], "point_indices": [], "box": [], "lasso": []}}) is None
    assert ui.selected_tile(None) is None and ui.selected_tile({}) is None
    assert ui.selected_tile({"selection": {"points": [{"customdata": ["a", "b"]}, {"customdata": [1, 0]}]}}) == (1, 0)


# --- small helpers ------------------------------------------------------------------------------------


def test_stage_note_explains_what_the_picture_cannot():
    full = make_trace(["a", "b", "c"])
    assert "masked equals scaled" in hm.stage_note(full, 0, "masked")
    causal = make_trace(["a", "b", "c"], causal=True)
    assert hm.stage_note(causal, 0, "masked").startswith("3 of 9")
    assert "exactly 0" in hm.stage_note(causal, 0, "weights")
    assert hm.stage_note(causal, 0, "scores") == ""
    long = make_trace([f"t{i}" for i in range(48)], n_layer=1, n_head=1, causal=True)  # 1,128 of 2,304 masked
    assert hm.stage_note(long, 0, "masked").startswith("1,128 of 2,304 query-key pairs")  # thousands separated


def test_chart_config_names_the_png():
    cfg = chart_config("layer2", "head 3", "weights")
    assert cfg["toImageButtonOptions"] == {"format": "png", "filename": "attnviz_layer2_head-3_weights", "scale": 2,
                                           "width": None, "height": None}  # fmt: skip
    assert "/" not in chart_config("../../etc", "<b>")["toImageButtonOptions"]["filename"]


def test_uniform_attention_is_called_out_and_module_titles_say_module():
    from attnviz.trace import AttentionTrace, Provenance

    T = 5
    flat = AttentionTrace.from_weights(
        list("abcde"), np.full((1, 2, T, T), 1 / T), provenance=Provenance(kind="module")
    )
    assert "nearly uniform" in hm.stage_note(flat, 0, "weights")
    assert hm.stage_note(make_trace(["a", "b", "c"]), 0, "weights") == ""
    assert hm.head_grid(flat, 0).layout.title.text.startswith("Our module")
    assert hm.head_detail(flat, 0, 1).layout.title.text.startswith("Our module · head 1")


# --- colour ranges (#12.6) ---------------------------------------------------------------------------------


def test_colour_ranges_stretch_small_weights_and_keep_the_true_weight_in_the_hover():
    w = np.array([[0.5, 0.25, 0.25, 0.0], [0.01, 0.01, 0.97, 0.01]], np.float32)
    np.testing.assert_array_equal(hm.colour_values("weights", w, "linear"), w)
    row = hm.colour_values("weights", w, "row")
    np.testing.assert_allclose(row.max(axis=-1), 1.0)
    np.testing.assert_allclose(row[0], [1, 0.5, 0.5, 0])
    np.testing.assert_allclose(hm.colour_values("weights", w, "sqrt"), np.sqrt(w))
    log = hm.colour_values("weights", w, "log")
    assert log.min() == pytest.approx(np.log10(hm.LOG_FLOOR)) and log.max() <= 0
    assert hm.colour("weights", w, mode="log") == dict(colorscale="Viridis", zmin=-4.0, zmax=0.0)
    for mode in ("linear", "row", "sqrt"):
        assert hm.colour("weights", w, mode=mode)["zmin"] == 0 and hm.colour("weights", w, mode=mode)["zmax"] == 1
    scores = np.array([[-3.0, 2.0]], np.float32)  # score stages are never transformed
    np.testing.assert_array_equal(hm.colour_values("scores", scores, "log"), scores)
    bar = hm.colour_bar("weights", "log", "weights")
    assert bar["ticktext"][-1] == "1" and bar["tickvals"][-1] == 0.0  # colour bar labelled in true weights


@pytest.mark.parametrize("n", [6, 60])
def test_transformed_grid_and_detail_hover_show_the_true_weight(n):
    tr = make_trace([f"t{i}" for i in range(n)], n_layer=1, n_head=2)
    w = tr.layer(0).weights
    grid = hm.head_grid(tr, 0, "weights", colours="sqrt")
    for h, t in enumerate(heat(grid)):
        np.testing.assert_allclose(np.asarray(t.z), np.sqrt(w[h]), rtol=1e-6)
        assert "%{z" not in t.hovertemplate  # z is sqrt(weight): the hover reads customdata instead
        custom = np.asarray(t.customdata)
        true = custom[..., 2].astype(float) if custom.ndim == 3 else custom
        np.testing.assert_allclose(true, w[h], rtol=1e-3)
    detail, custom = cells(hm.head_detail(tr, 0, 1, "weights", colours="log"))
    assert "weights %{customdata[0]" in detail.hovertemplate
    np.testing.assert_allclose(custom[..., 0], w[1], rtol=1e-6)
    assert heat(hm.overview(tr, "weights", colours="row"))[0].zmax == 1.0


def test_grid_hover_names_the_tokens_at_any_length():
    """#12.7: past 40 tokens the grid's hover still names query and key tokens, with no per-cell payload: the axes
    are categories named by the tokens, and category i sits at position i even in a window further on."""
    tokens = [f"w{i}" for i in range(300)]
    tr = make_trace(tokens, n_layer=1, n_head=2)
    fig = hm.head_grid(tr, 0, token_range=(100, 228))
    t = heat(fig)[0]
    assert "query %{y}" in t.hovertemplate and "key %{x}" in t.hovertemplate
    assert t.customdata is None, "no per-cell hover payload on a linear colour range"
    assert list(t.x)[0] == "100 w100" and list(t.y)[-1] == "227 w227" and len(t.x) == 128
    ax = fig.layout.xaxis
    assert list(ax.categoryarray).index("100 w100") == 100 and tuple(ax.range) == (99.5, 227.5)
