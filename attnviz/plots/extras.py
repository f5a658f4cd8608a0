"""Figures of what some models add to attention: the attention sink's share of each query (gpt-oss, Inkling 2) and
the scores before and after logit softcapping (Gemma 2). Inputs come from attnviz.analysis.extras."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from ..analysis.extras import Softcap
from .common import INK, f32, finish, group, group_edges, group_labels


def sink_share_bars(tokens, share: np.ndarray, head: int) -> go.Figure:
    """One bar per query token (or per group of consecutive tokens on a long text): the share of its attention
    that went to the sink, on a 0..1 axis."""
    edges = group_edges(len(share))
    fig = go.Figure(
        go.Bar(
            x=group_labels(tokens, edges),
            y=f32(group(share, edges)),
            marker_color="#7b3294",
            hovertemplate="query %{x}<br>sink share %{y:.3f}<extra></extra>",
            name="sink",
        )
    )
    fig.update_yaxes(range=[0, 1], title_text="share of the query's attention")
    fig.update_xaxes(title_text="query token", type="category", tickangle=-45)
    fig = finish(fig, "sink_share", height=320, top=40, title=f"Head {head}: what each query gave to the sink")
    return fig.update_layout(margin_l=70)  # room for the y-axis title


def softcap_curve(values: Softcap, head: int) -> go.Figure:
    """Each visible cell's score before the cap (x) against after it (y), with the line y = x the cells would sit
    on without a cap and the ceilings ±cap the tanh never crosses."""
    lo = float(min(values.before.min(initial=-values.cap), -values.cap))
    hi = float(max(values.before.max(initial=values.cap), values.cap))
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=[lo, hi], y=[lo, hi], mode="lines", name="no cap (y = x)",
                             line=dict(color="#999999", dash="dot"), hoverinfo="skip"))  # fmt: skip
    for sign in (1, -1):
        fig.add_trace(go.Scatter(x=[lo, hi], y=[sign * values.cap] * 2, mode="lines", showlegend=sign == 1,
                                 name=f"±cap ({values.cap:g})", line=dict(color=INK, width=1), hoverinfo="skip"))  # fmt: skip
    fig.add_trace(
        go.Scatter(
            x=f32(values.before),
            y=f32(values.after),
            mode="markers",
            marker=dict(size=5, color="#e66101", opacity=0.6),
            name="cells a query may see",
            hovertemplate="before %{x:.3f}<br>after %{y:.3f}<extra></extra>",
        )
    )
    fig.update_xaxes(title_text="q·k × scale, before the cap")
    fig.update_yaxes(title_text="scaled stage, after the cap")
    shown = "" if values.before.size == values.n_cells else f" ({values.before.size:,} of {values.n_cells:,} cells)"
    fig = finish(fig, "softcap_curve", height=380, top=80, title=f"Head {head}: scores squeezed by the cap{shown}")
    return fig.update_layout(margin_l=70, legend=dict(y=1.02))  # legend between the title and the plot
