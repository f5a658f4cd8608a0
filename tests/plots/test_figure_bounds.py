"""Figures whose panel or tile count comes from the trace draw a bounded amount, whatever the trace holds: the head
grid at most GRID_HEADS panels (which ones in its title), the overview at most OVERVIEW_CELLS cells of image."""

from __future__ import annotations

import numpy as np
from helpers import make_trace

from attnviz.plots import heatmaps as hm


def test_the_overview_shrinks_its_tiles_to_the_cell_budget(monkeypatch):
    trace = make_trace(["a"] * 30, n_layer=2, n_head=3)
    assert np.asarray(hm.overview(trace).data[0].z).shape == (2 * 25 - 1, 3 * 25 - 1)  # 24-cell tiles within budget
    monkeypatch.setattr(hm, "OVERVIEW_CELLS", 2_000)  # as 128 layers x 128 heads meet the real budget: smaller tiles
    fig = hm.overview(trace)
    image = np.asarray(fig.data[0].z)
    assert image.size <= 2_000 and image.shape == (2 * 18 - 1, 3 * 18 - 1)
    assert len(fig.data[1].customdata) == 2 * 3  # still one click target per tile


def test_a_head_grid_draws_at_most_its_panel_budget_and_says_which_heads():
    trace = make_trace(["a", "b"], n_layer=1, n_head=40)
    fig = hm.head_grid(trace, 0, first_head=20)
    assert len(fig.data) == hm.GRID_HEADS and fig.layout.meta["heads"] == [8, 40]
    assert "heads 8–39 of 40" in fig.layout.title.text
    np.testing.assert_allclose(fig.data[0].z, trace.layer(0).weights[8], atol=1e-6)
    assert "head 39" in fig.data[-1].hovertemplate
