"""Pure figure tests for attnviz.plots.sinks and .softcap: the sink-share bars and the softcap curve, from given numbers."""

from __future__ import annotations

import json

import numpy as np
from helpers import array

from attnviz.analysis.softcap import Softcap
from attnviz.plots import sinks as ps
from attnviz.plots import softcap as px


def _json(fig) -> dict:
    return json.loads(fig.to_json())


def test_sink_bars_show_each_query_share_with_escaped_tokens():
    tokens = ["<b>x</b>", "the", "the", "<br>"]
    share = np.array([0.5, 0.25, 0.125, 0.0])
    fig = _json(ps.sink_share_bars(tokens, share, head=2))
    assert fig["layout"]["meta"]["figure"] == "sink_share" and "Head 2" in fig["layout"]["title"]["text"]
    bar = fig["data"][0]
    np.testing.assert_allclose(array(bar["y"]), share)
    assert bar["x"] == ["00 &lt;b&gt;x&lt;/b&gt;", "01 the", "02 the", "03 &lt;br&gt;"]  # repeats stay apart
    assert fig["layout"]["yaxis"]["range"] == [0, 1]


def test_a_long_text_is_grouped_into_at_most_64_bars_of_the_mean_share():
    share = np.linspace(0, 1, 200)
    fig = _json(ps.sink_share_bars([f"t{i}" for i in range(200)], share, head=0))
    y = array(fig["data"][0]["y"])
    assert len(y) <= 64 and abs(y.mean() - share.mean()) < 0.01
    assert fig["data"][0]["x"][0].startswith("000–")


def test_softcap_curve_plots_before_against_after_with_the_ceilings():
    before = np.array([-20.0, -1.0, 0.0, 2.0, 30.0])
    values = Softcap(before, 5.0 * np.tanh(before / 5.0), 5.0, n_cells=10)
    fig = _json(px.softcap_curve(values, head=1))
    assert fig["layout"]["meta"]["figure"] == "softcap_curve"
    points = next(t for t in fig["data"] if t["mode"] == "markers")
    np.testing.assert_allclose(array(points["x"]), before, rtol=1e-6)
    np.testing.assert_allclose(array(points["y"]), values.after, rtol=1e-6)
    lines = [t for t in fig["data"] if t["mode"] == "lines"]
    assert sorted(t["y"][0] for t in lines[1:]) == [-5.0, 5.0]  # the ceilings
    assert lines[0]["x"] == lines[0]["y"] == [-20.0, 30.0]  # y = x over the whole range
    assert "5 of 10 cells" in fig["layout"]["title"]["text"]
