"""Figures of the Sentence pairs page, and the boundary line any heatmap can draw (`boundary_shapes`)."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from .common import f32, finish

BOUNDARY_COLOUR = "#ff4b4b"  # visible on Viridis and on the diverging scales, in both themes
BLOCK_COLOURS = {"A->A": "#4c78a8", "A->B": "#f58518", "B->A": "#e45756", "B->B": "#72b7b2"}


def boundary_shapes(boundary: int | None, span=None, xref: str = "x", yref: str = "y") -> list[dict]:
    """Plotly shapes marking where sentence A ends on a [query, key] heatmap drawn at token positions.

    Two lines between positions boundary-1 and boundary: a vertical one (keys) and a horizontal one (queries).
    span: the (start, stop) token window the heatmap draws (positions are absolute, as on the Heads page), or a
    (queries, keys) pair of them; a line is left out when the boundary falls outside its axis's window. xref/yref name a subplot's axes ("x3", "y3").
    Add with `fig.update_layout(shapes=[*fig.layout.shapes, *boundary_shapes(...)])` or `fig.add_shape(**s)`.
    """
    if boundary is None:
        return []
    rows, cols = (span, span) if span is None or not isinstance(span[0], (tuple, list)) else span  # a Window
    (q0, q1), (k0, k1) = ((0, boundary + 1) if r is None else (int(r[0]), int(r[1])) for r in (rows, cols))
    at, line = boundary - 0.5, dict(color=BOUNDARY_COLOUR, width=2, dash="dash")
    shapes = []
    if k0 < boundary < k1:  # the keys of sentence B start here: a vertical line over the drawn queries
        shapes.append(
            dict(
                type="line",
                x0=at,
                x1=at,
                y0=q0 - 0.5,
                y1=q1 - 0.5,
                xref=xref,
                yref=yref,
                line=line,
                name="end of sentence A",
            )
        )
    if q0 < boundary < q1:  # the queries of sentence B start here: a horizontal line over the drawn keys
        shapes.append(
            dict(
                type="line",
                x0=k0 - 0.5,
                x1=k1 - 0.5,
                y0=at,
                y1=at,
                xref=xref,
                yref=yref,
                line=line,
                name="end of sentence A",
            )
        )
    return shapes


def add_boundary(fig: go.Figure, boundary: int | None, span=None, panels: int = 1) -> go.Figure:
    """Draw `boundary_shapes` on the first `panels` subplots of `fig` (axes x, x2, x3 ... in subplot order).

    Every [query, key] heatmap builder calls this with the boundary the page passes (None: nothing drawn).
    """
    refs = [("x", "y")] + [(f"x{i}", f"y{i}") for i in range(2, panels + 1)]
    shapes = [s for xref, yref in refs for s in boundary_shapes(boundary, span, xref, yref)]
    if shapes:
        fig.update_layout(shapes=[*fig.layout.shapes, *shapes])
    return fig


def block_bars(shares: dict, blocks=("A->A", "A->B", "B->A", "B->B"), view: str = "weights") -> go.Figure:
    """Per head, the mean share of each block (grouped bars), on a 0..1 axis; `view`: what was shared (the weights,
    or value-weighted attention), said on the axis."""
    n_head = len(next(iter(shares.values())))
    heads = list(range(n_head))
    fig = go.Figure([go.Bar(name=b, x=heads, y=f32(shares[b]), marker_color=BLOCK_COLOURS[b]) for b in blocks])
    fig.update_layout(
        barmode="group",
        xaxis=dict(title="head", tickmode="array", tickvals=heads),
        yaxis=dict(title="mean share of a row" + _of(view), range=[0, 1]),
    )
    return finish(
        fig, "pair_blocks", 360, margin=dict(l=60, r=20, t=40, b=50), legend=dict(orientation="v"), meta={"view": view}
    )


def _of(view: str) -> str:
    return "" if view == "weights" else f" ({view})"


def crossing_bars(crossing: np.ndarray, view: str = "weights") -> go.Figure:
    """Per head, the share of all attention that crosses between the sentences (`view` as in block_bars)."""
    heads = list(range(len(crossing)))
    fig = go.Figure(go.Bar(x=heads, y=f32(crossing), marker_color=BLOCK_COLOURS["A->B"], name="crossing"))
    fig.update_layout(
        xaxis=dict(title="head", tickmode="array", tickvals=heads),
        yaxis=dict(title="share crossing between A and B" + _of(view), range=[0, 1]),
    )
    return finish(fig, "pair_crossing", 300, margin=dict(l=60, r=20, t=30, b=50), meta={"view": view})
