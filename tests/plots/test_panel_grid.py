"""The Heads grid is built as one dict (plots.panels, finished by common.finish) instead of make_subplots and per-axis
updates: its layout must be make_subplots' own, to the last bit, and the style rule must leave nothing to change."""

from __future__ import annotations

import json

import plotly.graph_objects as go
import plotly.io as pio
import pytest
from plotly.subplots import make_subplots

import attnviz
from attnviz.plots import common
from attnviz.plots import heatmaps as hm
from attnviz.plots.panels import panel_axes, panel_layout


def _plain(fig: go.Figure) -> dict:
    return json.loads(pio.to_json(fig))


@pytest.mark.parametrize("n_panels", [1, 2, 3, 5, 12, 16, 25, 32, 40, 64])
@pytest.mark.parametrize("cols", [1, 3, 4, 8])
def test_the_layout_is_make_subplots_own(n_panels, cols):
    cols = min(cols, n_panels)
    rows = -(-n_panels // cols)
    hspace, vspace = 0.02 if cols > 1 else 0.0, min(0.06, 0.3 / rows) if rows > 1 else 0.0  # as head_grid
    titles = [f"head {i}" if i % 5 else "" for i in range(n_panels)]  # an empty title gets no annotation
    ref = make_subplots(rows=rows, cols=cols, subplot_titles=titles, shared_xaxes=True, shared_yaxes=True,
                        horizontal_spacing=hspace, vertical_spacing=vspace)  # fmt: skip
    ours = go.Figure(layout=panel_layout(rows, cols, titles, hspace, vspace))
    ref.update_layout(template="plotly_white")
    ours.update_layout(template="plotly_white")
    assert _plain(ours) == _plain(ref)
    for i in (0, n_panels - 1):  # add_trace(row=, col=) puts a trace on these axes
        ref.add_trace(go.Heatmap(z=[[1]]), row=i // cols + 1, col=i % cols + 1)
        assert {"xaxis": ref.data[-1].xaxis, "yaxis": ref.data[-1].yaxis} == panel_axes(i)


@pytest.mark.parametrize("stage", ["weights", "masked", "value-weighted"])
def test_the_grid_already_follows_the_style_rule(bundled, stage):
    """on_paper applied again (as print_ready does for a download) changes nothing: the dict path applied it all."""
    trace = attnviz.trace(bundled, "the cat sat on the mat because it was tired")
    grid = hm.head_grid(trace, 1, stage, cols=5, boundary=4)  # 12 heads in 3 rows of 5: empty panels too
    assert _plain(common.print_ready(grid)) == _plain(grid)
    assert len(grid.data) == 12 and grid.layout.paper_bgcolor == common.PAPER
    assert grid.layout.plot_bgcolor == (common.MASKED_BG if stage == "masked" else common.PAPER)
