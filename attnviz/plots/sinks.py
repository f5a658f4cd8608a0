"""Figures of attention sinks: the learned sink's share of each query (gpt-oss, Inkling 2) and, per layer x head,
the share of attention first tokens and learned sinks take (from attnviz.analysis.sinks)."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from .common import f32, finish, group, group_edges, group_labels


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
