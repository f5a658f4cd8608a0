"""attnviz's chart component (ui.plotly_view) in AppTest: what a chart sends the browser, and the slots that keep a
chart mounted across runs. Drawing itself (one Plotly.react per change, clicks) is checked in Chromium
(tests/browser/test_browser.py, test_chart_clicks.py)."""

from __future__ import annotations

import json

import plotly.graph_objects as go
import plotly.io as pio
from helpers import charts
from streamlit.testing.v1 import AppTest

from attnviz.ui.plotly_view import SCRIPT, slot


def _two_bar_charts():  # AppTest runs this function's source alone: its imports are its own
    import plotly.graph_objects as go

    from attnviz import ui

    for layer in (3, 4):  # the same chart of two layers: one slot, so the second takes the next free key
        ui.chart(go.Figure(go.Bar(y=[layer, 2], name="bars")), f"layer{layer}", "bars")
    ui.chart(go.Figure(go.Bar(y=[1])), "other", key="mine")


def test_a_chart_sends_its_figure_as_built_with_the_modebar_config_and_where_plotly_is():
    at = AppTest.from_function(_two_bar_charts, default_timeout=60).run()
    assert not at.exception
    sent = charts(at)
    assert len(sent) == 3
    assert sent[0]["figure"] == json.loads(pio.to_json(go.Figure(go.Bar(y=[3, 2], name="bars")), validate=False))
    assert sent[0]["config"]["toImageButtonOptions"]["filename"].endswith("layer3_bars")
    assert sent[0]["script"].startswith("component/") and sent[0]["script"].endswith(f"/{SCRIPT}")


def test_charts_take_stable_slots_numbers_left_out_and_a_repeat_the_next_free_one():
    assert slot(("layer3", "head12", "weights")) == slot(("layer0", "head1", "weights")) == "chart:layer#/head#/weights"
    assert slot(("overview", "masked")) != slot(("overview", "weights"))
    at = AppTest.from_function(_two_bar_charts, default_timeout=60).run()
    ids = [el.proto.id for el in at.get("bidi_component")]
    assert [i.split("-", 2)[-1] for i in ids] == ["chart:layer#/bars", "chart:layer#/bars~1", "mine"], ids
