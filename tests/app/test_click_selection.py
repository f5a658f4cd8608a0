"""What a chart click means, as pure functions: the key a click on the one-head view picks, the head a click on the
Ablation grid toggles (at most MOST_HEADS), and the click targets those events come from."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
import pytest

import attnviz
from attnviz import ui
from attnviz.plots import ablation as ap
from attnviz.plots import heatmaps as hm
from attnviz.plots.clickable import MOST_CELLS, cell_targets
from attnviz.ui.ablation import MOST_HEADS


def event(*points) -> dict:
    return {"selection": {"points": list(points), "point_indices": [], "box": [], "lasso": []}}


def test_a_click_on_a_cell_names_its_column_and_nothing_else_does():
    assert ui.selected_key(event({"x": 3, "y": 5, "customdata": ["05 the", "03 sat", "0.1"]}), 8) == 3
    assert ui.selected_key(event({"x": 7.0, "y": 0}), 8) == 7  # typed arrays come back as floats
    for bad in (event({"x": 8, "y": 0}), event({"x": -1}), event({"x": 2.5}), event({"x": "3"}), event({"x": True}),
                event({"y": 3}), event(), {"selection": {}}, {}, None, "x"):  # fmt: skip
        assert ui.selected_key(bad, 8) is None, bad
    assert ui.selected_key(event({"x": "a"}, {"x": 4}), 8) == 4  # the first usable point


def test_a_click_on_the_grid_names_a_head_of_the_model_and_nothing_else_does():
    assert ui.selected_head(event({"customdata": [1, 3]}), 2, 4) == (1, 3)
    assert ui.selected_head(event({"customdata": {"0": 0, "1": 2}}), 2, 4) == (0, 2)
    for bad in ([2, 0], [0, 4], [-1, 0], ["a", "b"]):
        assert ui.selected_head(event({"customdata": bad}), 2, 4) is None, bad
    assert ui.selected_head(event(), 2, 4) is None and ui.selected_head(None, 2, 4) is None


def test_a_click_toggles_a_head_and_never_passes_the_limit():
    assert ui.toggle_head(["0-1"], "1-2", MOST_HEADS) == (["0-1", "1-2"], False)
    assert ui.toggle_head(["0-1", "1-2"], "0-1", MOST_HEADS) == (["1-2"], False)
    full = [f"0-{h}" for h in range(MOST_HEADS)]
    assert ui.toggle_head(full, "1-0", MOST_HEADS) == (full, True)  # refused: the page says so
    assert ui.toggle_head(full, "0-3", MOST_HEADS) == ([h for h in full if h != "0-3"], False)  # removing always works
    picked = []
    for head in ["0-1", "1-2", "0-1", "0-1"]:  # clicked four times: on, on, off, on
        picked, _ = ui.toggle_head(picked, head, MOST_HEADS)
    assert picked == ["1-2", "0-1"]


def test_the_one_head_view_has_a_click_target_on_every_cell_carrying_that_cells_hover(bundled):
    tr = attnviz.trace(bundled, "The cat sat on the mat.")
    fig = hm.head_detail(tr, 2, 5, token_range=(1, 6))
    (cells,) = [t for t in fig.data if t.name == hm.CELLS]
    assert fig.data[-1] is cells and cells.marker.symbol == "square"  # last: drawn on top, so clicks reach it
    x, y = np.asarray(cells.x), np.asarray(cells.y)
    assert sorted(zip(y.tolist(), x.tolist())) == [(q, k) for q in range(1, 6) for k in range(1, 6)]
    weights = tr.layer(2).weights[5]
    labels = [f"{i:02d} {t}" for i, t in enumerate(tr.tokens)]
    # the hover names a cell's tokens by the ticks of the targets' own hidden axes, which tick every position
    xa, ya = fig.layout[cells.xaxis.replace("x", "xaxis")], fig.layout[cells.yaxis.replace("y", "yaxis")]
    assert xa.overlaying == "x" and ya.overlaying == "y" and xa.showticklabels is False
    names = {"x": dict(zip(xa.tickvals, xa.ticktext)), "y": dict(zip(ya.tickvals, ya.ticktext))}
    assert "query %{y}<br>key %{x}<br>weights %{customdata[0]" in cells.hovertemplate
    for i, (q, k) in enumerate(zip(y, x)):  # each marker's hover names its own cell and reads its own weight
        assert (names["y"][q], names["x"][k]) == (labels[q], labels[k])
        assert float(cells.customdata[i][0]) == pytest.approx(weights[q, k], rel=1e-6)
    assert cells.marker.maxdisplayed == 1  # drawn: one invisible marker; hover and clicks search them all
    assert all(t.hoverinfo == "skip" for t in fig.data if isinstance(t, go.Heatmap))


def test_click_targets_are_bounded():
    assert len(cell_targets((0, 128), (0, 128), 5).x) == MOST_CELLS
    with pytest.raises(ValueError):
        cell_targets((0, 129), (0, 128), 5)


def test_the_ablation_grid_fills_the_removed_heads():
    fig = ap.head_picker(2, 4, [(0, 1), (1, 3)])
    (t,) = fig.data
    filled = {tuple(c) for c, colour in zip(t.customdata, t.marker.color) if colour == ap.REMOVED}
    assert filled == {(0, 1), (1, 3)} and len(t.customdata) == 8
    assert [(int(a), int(b)) for a, b in zip(t.y, t.x)] == [tuple(c) for c in t.customdata]  # square at its head
