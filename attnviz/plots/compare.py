"""Figures of the Compare page: per-head difference heatmaps on one diverging scale centred at 0."""

from __future__ import annotations

import math

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .common import DIFF_SCALE, MAX_TICKS, escape, f32, finish, symmetric_range, ticks
from .pairs import add_boundary
from .value_weighted import note_lines


def diff_grid(
    diff: np.ndarray,
    tokens,
    title: str,
    order=None,
    cols: int = 4,
    labels=None,
    boundary=None,
    window=None,
    key_tokens=None,
    view: str = "weights",
) -> go.Figure:
    """Every head's b - a [head, query, key] as a heatmap, ONE colour range -r..r (zmid 0), heads in `order`.

    labels: hover names of the heads (e.g. "head 3, rank 1"); tokens label the axes (the first text's tokens, all of
    them), key_tokens the key axis when keys are other tokens (cross-attention: the source text).
    boundary: where sentence B of a pair starts (positions of the whole text), or None.
    window: the ((query start, stop), (key start, stop)) of the whole text that diff holds (a long text's
    `windows`, drawn at its own positions as on the Heads page); None: diff is the whole text.
    view: which of analysis.values.VIEWS was compared (value-weighted: what it is, under the title; meta["view"]).
    """
    d = f32(diff)
    n_head, n, n_key = d.shape
    (q0, q1), (k0, k1) = ((0, n), (0, n_key)) if window is None else window
    order = list(range(n_head)) if order is None else list(order)
    labels = [f"head {h}" for h in order] if labels is None else labels
    cols = max(1, min(cols, n_head))
    rows = math.ceil(n_head / cols)
    r = symmetric_range(d) or 1e-9
    fig = make_subplots(
        rows=rows,
        cols=cols,
        subplot_titles=[escape(s) for s in labels],
        shared_xaxes=True,
        shared_yaxes=True,
        horizontal_spacing=0.02,
        vertical_spacing=min(0.06, 0.3 / rows) if rows > 1 else 0,
    )
    for i, h in enumerate(order):
        fig.add_trace(
            go.Heatmap(
                z=d[h],
                x0=k0,
                dx=1,
                y0=q0,
                dy=1,
                colorscale=DIFF_SCALE,
                zmin=-r,
                zmax=r,
                zmid=0.0,
                showscale=i == 0,
                colorbar=dict(title=dict(text="b − a", side="right"), thickness=14),
                hovertemplate=f"head {h}<br>query %{{y}} · key %{{x}}<br>b − a %{{z:.4f}}<extra></extra>",
            ),
            row=i // cols + 1,
            col=i % cols + 1,
        )
    fig.update_xaxes(
        **ticks(tokens if key_tokens is None else key_tokens, k0, k1, MAX_TICKS // 2),
        showticklabels=False,
        showgrid=False,
        range=[k0 - 0.5, k1 - 0.5],
    )
    fig.update_yaxes(
        **ticks(tokens, q0, q1, MAX_TICKS // 2), tickfont_size=9, showgrid=False, range=[q1 - 0.5, q0 - 0.5]
    )
    fig.update_annotations(font_size=12)
    panel = max(160, min(320, 860 // cols))
    notes = note_lines(view, 150)
    text = escape(title) + "".join(f"<br><sup>{escape(n)}</sup>" for n in notes)
    finish(
        fig,
        "diff_grid",
        rows * panel + 100,
        margin=dict(l=100, r=10, t=60 + 18 * len(notes), b=10),
        meta={"order": order, "view": view},
        title=dict(text=text, font_size=14, x=0, xanchor="left"),
    )
    return add_boundary(fig, boundary, ((q0, q1), (k0, k1)), n_head)
