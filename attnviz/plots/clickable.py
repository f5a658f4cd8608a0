"""Click targets for heatmaps: Streamlit's chart selection ignores heatmap cells (a click on one returns an empty
selection), so a figure that must answer a click carries a scatter of square markers over its cells.

The markers are invisible; hover and click land on the marker nearest the mouse, which on a grid of cells is the
cell under it. A heatmap beneath cannot show its own hover label as well: Plotly gives the hover to the markers
(point-like traces win over area-like ones, and in "closest" hover mode only one label is drawn), so the markers
carry the hover and the heatmap has none.

What a browser receives and draws stays small however many cells there are:
- Plotly draws only `marker.maxdisplayed` of the markers (1): hover and selection still search every point, and
  16,384 invisible SVG markers were most of the time a 128 x 128 view took to draw.
- The hover's numbers are one float32 typed array (customdata [cell, value]), formatted by the hovertemplate; no
  string per cell.
- The tokens' names come from two hidden axes the markers sit on (`TARGET_AXES`, laid over the heatmap's): a hover
  label of a value on an axis whose ticks are an array shows that tick's text, so every position is a tick there,
  named by its token once per axis, while the visible axes below keep their thinned labels.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from .common import INK, PAPER, f32

CELLS = "cells"  # the name of the click-target trace: the dashboard and tests find it by this name
MOST_CELLS = 128 * 128  # one marker per drawn cell; the Heads page draws at most 128 x 128
TARGET_AXES = ("x2", "y2")  # the hidden axes the markers sit on, laid over the first subplot's x and y


def cell_targets(rows: tuple[int, int], cols: tuple[int, int], cell_px: float, values=None) -> go.Scatter:
    """One invisible square marker at the centre of every cell of rows x cols (positional axes: cell (q, k) is at
    x=k, y=q), sized about the cell, on TARGET_AXES (see `target_axes`). `values`: {name: [row, col] array}, shown in
    the hover under the query and the key (4 significant digits), in that order; None or empty: the tokens alone.

    A click selects the marker: its x is the column (a key), its y the row (a query). Coordinates go as int16 or
    int32 typed arrays (2 or 4 bytes a cell), the values as one float32 array (4 bytes a cell and value)."""
    (q0, q1), (k0, k1) = rows, cols
    if (q1 - q0) * (k1 - k0) > MOST_CELLS:
        raise ValueError(f"{(q1 - q0) * (k1 - k0)} cells: at most {MOST_CELLS} click targets")
    dtype = np.int16 if max(q1, k1) < 2**15 else np.int32
    y, x = np.meshgrid(np.arange(q0, q1, dtype=dtype), np.arange(k0, k1, dtype=dtype), indexing="ij")
    hover = "query %{y}<br>key %{x}"
    values = dict(values or {})
    for i, name in enumerate(values):
        hover += f"<br>{name} %{{customdata[{i}]:.4~g}}"
    custom = None
    if values:  # [row-major cell, value]: the markers' order
        custom = f32(np.stack([np.asarray(v, dtype=np.float32).reshape(x.size) for v in values.values()], axis=-1))
    return go.Scatter(
        x=x.ravel(),
        y=y.ravel(),
        xaxis=TARGET_AXES[0],
        yaxis=TARGET_AXES[1],
        mode="markers",
        marker=dict(
            symbol="square",
            size=max(2.0, float(cell_px)),
            color="rgba(0,0,0,0)",
            line=dict(width=0),
            maxdisplayed=1,  # draw one (invisible) marker; hover and clicks still find every cell's
        ),
        selected=dict(marker=dict(opacity=0)),  # Plotly dims what a click leaves unselected: nothing to dim
        unselected=dict(marker=dict(opacity=0)),
        customdata=custom,
        hovertemplate=hover + "<extra></extra>",
        hoverlabel=dict(bgcolor=PAPER, bordercolor=INK, font=dict(color=INK)),
        showlegend=False,
        name=CELLS,
    )


def target_axes(rows: tuple[int, int], cols: tuple[int, int], query_labels, key_labels) -> dict:
    """Layout for TARGET_AXES: hidden, laid over (and zoomed with) x and y, a tick at every position of rows / cols
    named by `query_labels` / `key_labels` (one escaped label per position of the window), so that the markers'
    hover names both tokens. Rows run down the page, as the heatmap's do."""
    (q0, q1), (k0, k1) = rows, cols

    def axis(over: str, start: int, stop: int, labels, down: bool) -> dict:
        return dict(
            overlaying=over,
            matches=over,
            range=[stop - 0.5, start - 0.5] if down else [start - 0.5, stop - 0.5],
            tickmode="array",
            tickvals=list(range(start, stop)),
            ticktext=list(labels),
            showticklabels=False,
            ticks="",
            showgrid=False,
            zeroline=False,
            showline=False,
        )

    return dict(xaxis2=axis("x", k0, k1, key_labels, False), yaxis2=axis("y", q0, q1, query_labels, True))
