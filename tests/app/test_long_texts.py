"""Pages at ~400 tokens (#12.6): colour ranges that show structure, and long charts grouped, saying so."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import array, click_cells, figures, heatmaps, run_page, texts

LONG = " ".join(["The cat sat on the mat because it was tired, and the dog watched it from the door."] * 20)


@pytest.fixture(scope="module")
def heads():
    at = run_page("app_pages/heads.py", text=LONG)
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_heads_offers_colour_ranges_and_the_hover_keeps_the_true_weight(heads):
    radio = heads.radio(key="colour")
    assert radio.options == ["linear 0..1", "per-row max", "power 0.5", "log"] and radio.value == "linear"
    linear = [array(t["z"]) for t in heatmaps(figures(heads)["head_grid"])]
    radio.set_value("row").run()
    assert not heads.exception
    assert heads.query_params.get("colour") in ("row", ["row"])  # a short id in the link
    grid = figures(heads)["head_grid"]
    for w, t in zip(linear, heatmaps(grid)):
        z = array(t["z"])
        np.testing.assert_allclose(np.nanmax(z, axis=-1), 1.0, rtol=1e-5)  # every row reaches the top colour
        np.testing.assert_allclose(array(t["customdata"]), w, rtol=1e-5)  # hover: the true weight
        assert "customdata" in t["hovertemplate"] and "%{z" not in t["hovertemplate"]
    assert np.median(linear[0]) < 0.02  # what made the linear scale dark
    heads.radio(key="colour").set_value("log").run()
    detail = figures(heads)["head_detail"]
    assert detail["data"][0]["zmin"] == pytest.approx(-4) and detail["data"][0]["zmax"] == 0
    assert "weights %{customdata[0]" in click_cells(detail)["hovertemplate"]


def test_long_charts_are_grouped_and_the_page_says_so():
    at = run_page("app_pages/scaling.py", text=LONG)
    assert not at.exception
    rows = figures(at)["row_saturation"]
    assert all(
        len(t["x"] if isinstance(t["x"], list) else array(t["x"])) <= 64
        for t in rows["data"]
        if t["type"] == "scatter" and t.get("customdata") is not None
    )
    assert any("in 64 groups" in m for m in texts(at, "markdown")), texts(at, "markdown")
    at = run_page("app_pages/masks.py", text=LONG)
    assert not at.exception
    fill = figures(at)["fill_demo"]["data"][0]
    z = array(fill["z"])
    assert z.shape[1] == 64
    np.testing.assert_allclose(z[0].sum(), 1.0, atol=1e-4)  # totals: a row still sums to 1
    assert any("in 64 groups" in m and "total weight" in m for m in texts(at, "markdown"))
