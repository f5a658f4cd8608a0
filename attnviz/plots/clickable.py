"""Click targets for heatmaps: Streamlit's chart selection ignores heatmap cells (a click on one returns an empty
selection), so a figure that must answer a click carries a scatter of square markers over its cells.

The markers are invisible; hover and click land on the marker nearest the mouse, which on a grid of cells is the
cell under it. A heatmap beneath cannot show its own hover label as well: Plotly gives the hover to the markers
(point-like traces win over area-like ones), so the markers carry the hover text and the heatmap has none.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from .common import INK, PAPER

CELLS = "cells"  # the name of the click-target trace: the dashboard and tests find it by this name
MOST_CELLS = 128 * 128  # one marker per drawn cell; the Heads page draws at most 128 x 128


def cell_targets(rows: tuple[int, int], cols: tuple[int, int], cell_px: float, **hover) -> go.Scatter:
    """One invisible square marker at the centre of every cell of rows x cols (positional axes: cell (q, k) is at
    x=k, y=q), sized about the cell. `hover`: the trace's customdata [row, col, ...] and hovertemplate, if any.

    A click selects the marker: its x is the column (a key), its y the row (a query). Coordinates go as int16 or
    int32 typed arrays (2 or 4 bytes a cell)."""
    (q0, q1), (k0, k1) = rows, cols
    if (q1 - q0) * (k1 - k0) > MOST_CELLS:
        raise ValueError(f"{(q1 - q0) * (k1 - k0)} cells: at most {MOST_CELLS} click targets")
    dtype = np.int16 if max(q1, k1) < 2**15 else np.int32
    y, x = np.meshgrid(np.arange(q0, q1, dtype=dtype), np.arange(k0, k1, dtype=dtype), indexing="ij")
    if "customdata" in hover:  # [row, col, ...] -> one entry per marker, in the markers' (row-major) order
        custom = np.asarray(hover.pop("customdata"), dtype=object)
        hover["customdata"] = custom.reshape(x.size, -1) if custom.ndim > 2 else custom.ravel()
    return go.Scatter(
        x=x.ravel(),
        y=y.ravel(),
        mode="markers",
        marker=dict(symbol="square", size=max(2.0, float(cell_px)), color="rgba(0,0,0,0)", line=dict(width=0)),
        selected=dict(marker=dict(opacity=0)),  # Plotly dims what a click leaves unselected: nothing to dim
        unselected=dict(marker=dict(opacity=0)),
        hoverlabel=dict(bgcolor=PAPER, bordercolor=INK, font=dict(color=INK)),
        showlegend=False,
        name=CELLS,
        **(hover or dict(hoverinfo="none")),
    )
