"""The parts of a generated sequence on a heatmap's axes: a coloured strip along the keys (above the map) and along
the queries (right of it) for the prompt, the generated tokens and any chat template roles."""

from __future__ import annotations

import plotly.graph_objects as go

from ..trace.generation import Segment
from .windows import axis_ranges

#: One colour per part, readable on the white chart card; roles a template names that are not here are grey.
SPAN_COLOURS = {
    "prompt": "#9aa0a6",
    "generated": "#f58518",
    "system": "#72b7b2",
    "user": "#4c78a8",
    "assistant": "#54a24b",
}
OTHER = "#bab0ac"
STRIP = 0.025  # the strips' width, as a share of the panel


def span_shapes(spans: tuple[Segment, ...], queries, keys, xref: str = "x", yref: str = "y") -> list[dict]:
    """Plotly rectangles marking each span's tokens within the drawn (start, stop) windows of queries and keys."""
    shapes = []
    for s in spans:
        colour, name = SPAN_COLOURS.get(s.role, OTHER), s.role
        k0, k1 = max(s.start, keys[0]), min(s.stop, keys[1])
        if k0 < k1:
            shapes.append(
                dict(
                    type="rect",
                    xref=xref,
                    yref=f"{yref} domain",
                    x0=k0 - 0.5,
                    x1=k1 - 0.5,
                    y0=1.0,
                    y1=1.0 + STRIP,
                    fillcolor=colour,
                    line=dict(width=0),
                    name=name,
                )
            )
        q0, q1 = max(s.start, queries[0]), min(s.stop, queries[1])
        if q0 < q1:
            shapes.append(
                dict(
                    type="rect",
                    xref=f"{xref} domain",
                    yref=yref,
                    x0=1.0,
                    x1=1.0 + STRIP,
                    y0=q0 - 0.5,
                    y1=q1 - 0.5,
                    fillcolor=colour,
                    line=dict(width=0),
                    name=name,
                )
            )
    return shapes


def add_spans(fig: go.Figure, trace, token_range, panels: int = 1) -> go.Figure:
    """Mark a generated trace's prompt, generated tokens and chat roles on the first `panels` subplots (a trace that
    is not a generation is left as it is). token_range: the (queries, keys) windows the figure draws."""
    generation = getattr(trace, "generation", None)
    if generation is None:
        return fig
    queries, keys = axis_ranges(token_range)
    refs = [("x", "y")] + [(f"x{i}", f"y{i}") for i in range(2, panels + 1)]
    shapes = [s for x, y in refs for s in span_shapes(generation.spans, queries, keys, x, y)]
    fig.update_layout(shapes=[*fig.layout.shapes, *shapes])
    return fig
