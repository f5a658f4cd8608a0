"""The Scaling page in AppTest: every control changes the figures the way the math says it should."""

from __future__ import annotations

import math

import numpy as np
import pytest
from helpers import array, figures, run_page

import attnviz


def trace_named(fig: dict, name: str) -> dict:
    return next(t for t in fig["data"] if t.get("name") == name)


# --- fixtures ------------------------------------------------------------------------------------------------


@pytest.fixture
def page():
    at = run_page("app_pages/scaling.py")
    assert not at.exception, [e.value for e in at.exception]
    return at


def bars(fig: dict, col: int) -> tuple[np.ndarray, np.ndarray]:
    b = [t for t in fig["data"] if t["type"] == "bar"][col]
    return array(b["x"]), array(b["y"])


# --- tests ---------------------------------------------------------------------------------------------------


def test_default_view_shows_every_figure_and_the_model_weights(page, bundled):
    figs = figures(page)
    assert set(figs) == {"score_histograms", "softmax_pair", "row_saturation", "sqrt_d_law"}
    assert not page.error and not page.exception
    tr = attnviz.trace(bundled, page.session_state["text"])
    scaled = array(trace_named(figs["softmax_pair"], "softmax scaled")["z"])
    np.testing.assert_allclose(scaled, tr.weights[0, 0], atol=1e-6)  # the model's scale reproduces the model
    raw = array(trace_named(figs["softmax_pair"], "softmax raw")["z"])
    assert raw.max(axis=-1).mean() > scaled.max(axis=-1).mean()  # the raw softmax is more peaked
    np.testing.assert_allclose(raw.sum(-1), 1, atol=1e-5)


def test_histograms_count_every_cell_and_scaled_is_narrower(page, bundled):
    h = figures(page)["score_histograms"]
    T = attnviz.trace(bundled, page.session_state["text"]).n_tokens
    x_raw, y_raw = bars(h, 0)
    x_div, y_div = bars(h, 1)
    assert y_raw.sum() == y_div.sum() == T * T  # one head: every cell once
    spread = lambda x: x.max() - x.min()  # noqa: E731
    assert spread(x_div) == pytest.approx(spread(x_raw) / math.sqrt(32), rel=0.02)
    # one x axis for both, so the shrink is seen: the raw bars fill it, the scaled ones a sixth of it around 0
    (low, high), layout = h["layout"]["xaxis"]["range"], h["layout"]
    assert layout["xaxis2"]["matches"] == "x" and layout["xaxis2"].get("range", [low, high]) == [low, high]
    assert low <= x_raw.min() and x_raw.max() <= high and spread(x_raw) > 0.9 * (high - low)
    assert spread(x_div) < (high - low) / 5


def test_scale_changes_histogram_and_softmax(page):
    before = figures(page)
    page.select_slider(key="scale").set_value(round(1 / 32, 8)).run()
    assert not page.exception
    after = figures(page)
    x_before, _ = bars(before["score_histograms"], 1)
    x_after, _ = bars(after["score_histograms"], 1)
    assert (x_after.max() - x_after.min()) == pytest.approx(
        (x_before.max() - x_before.min()) * math.sqrt(32) / 32, rel=0.02
    )
    w_before = array(trace_named(before["softmax_pair"], "softmax scaled")["z"])
    w_after = array(trace_named(after["softmax_pair"], "softmax scaled")["z"])
    assert w_after.max(axis=-1).mean() < w_before.max(axis=-1).mean()  # a smaller scale flattens the rows
    # scale 1 is the raw softmax on both sides
    page.select_slider(key="scale").set_value(1.0).run()
    one = figures(page)["softmax_pair"]
    np.testing.assert_allclose(
        array(trace_named(one, "softmax scaled")["z"]), array(trace_named(one, "softmax raw")["z"]), atol=1e-7
    )
    assert "What-if" in " ".join(c.value for c in page.caption)


def test_all_heads_pools_every_head(page, bundled):
    T = attnviz.trace(bundled, page.session_state["text"]).n_tokens
    page.toggle(key="all_heads").set_value(True).run()
    assert not page.exception
    _, counts = bars(figures(page)["score_histograms"], 0)
    assert counts.sum() == 12 * T * T
    assert "mean of 12 heads" in figures(page)["softmax_pair"]["layout"]["annotations"][0]["text"]


def test_head_and_layer_change_the_figures(page):
    first = array(trace_named(figures(page)["softmax_pair"], "softmax scaled")["z"])
    page.slider(key="head").set_value(5).run()
    head5 = array(trace_named(figures(page)["softmax_pair"], "softmax scaled")["z"])
    assert not np.allclose(first, head5)
    page.session_state["layer"] = 3  # sidebar widgets vanish from AppTest after a rerun: set their state instead
    page.run()
    assert not page.exception
    layer3 = array(trace_named(figures(page)["softmax_pair"], "softmax scaled")["z"])
    assert not np.allclose(head5, layer3)
    assert any("Layer 3, head 5" in c.value for c in page.caption)


def test_law_figure_shows_the_variance_law(page):
    law = figures(page)["sqrt_d_law"]
    raw = [t for t in law["data"] if t.get("name") == "q·k (unscaled)"][0]
    scaled = [t for t in law["data"] if t.get("name") == "q·k ÷ √d (scaled)"][0]
    d, var_raw, var_scaled = array(raw["x"]), array(raw["y"]), array(scaled["y"])
    np.testing.assert_allclose(var_raw / d, 1, rtol=0.2)
    np.testing.assert_allclose(var_scaled, 1, rtol=0.2)
    assert law["layout"]["xaxis"]["type"] == "log" and law["layout"]["yaxis"]["type"] == "log"


def test_new_sentence_and_our_module(page):
    page.session_state["text"] = "Hello <b>world</b>, hello again."
    page.run()
    assert not page.exception
    pair = figures(page)["softmax_pair"]
    ticks = pair["layout"]["yaxis"]["ticktext"]
    assert "02 &lt;" in ticks and not any("<" in t or ">" in t for t in ticks)  # tokens are escaped for Plotly
    page.session_state["source"] = "module"
    page.run()
    assert not page.exception and "softmax_pair" in figures(page)


def test_empty_text_shows_a_message_not_a_traceback(page):
    page.session_state["text"] = "   "
    page.run()
    assert not page.exception
    assert any("Type a sentence" in i.value for i in page.info)
    assert set(figures(page)) == {"sqrt_d_law"}  # the law does not need a sentence
