"""Figures of attention sinks: the learned sink's share of each query (gpt-oss, Inkling 2) and, per layer x head,
the share of attention first tokens and learned sinks take (from attnviz.analysis.sinks)."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .common import escape, f32, finish, group, group_edges, group_labels


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
    return finish(fig, "sink_share", height=320, top=40, title=f"Head {head}: what each query gave to the sink")


SINK_SCALE = "Magma"  # sequential, the same for both maps so a colour means one share in both


def sink_maps(first: np.ndarray, learned: np.ndarray | None = None, first_label: str = "first token") -> go.Figure:
    """One or two [layer, head] grids of a share of attention on ONE 0..1 colour scale: what the first token (key 0)
    takes, and, for a model with learned sinks, what the learned sink takes; NaN (no such sink in a layer) is a gap."""
    maps = [(f"to the first token, {escape(first_label)}", first)] + (
        [] if learned is None else [("to the learned sink", learned)]
    )
    fig = make_subplots(rows=1, cols=len(maps), subplot_titles=[t for t, _ in maps], horizontal_spacing=0.08)
    n_layer, n_head = first.shape
    for i, (title, values) in enumerate(maps):
        v = f32(values)
        fig.add_trace(
            go.Heatmap(
                z=v,
                x=list(range(n_head)),
                y=list(range(n_layer)),
                colorscale=SINK_SCALE,
                zmin=0.0,
                zmax=1.0,
                showscale=i == 0,
                text=np.char.mod("%.2f", v.astype(np.float64)),
                texttemplate="%{text}" if v.size <= 200 else None,
                hovertemplate=f"layer %{{y}}, head %{{x}}<br>{title}: %{{z:.3f}}<extra></extra>",
                hoverongaps=False,
                colorbar=dict(title=dict(text="share of a row", side="right"), thickness=14),
            ),
            row=1,
            col=i + 1,
        )
        whole = dict(tickmode="linear", tick0=0, dtick=1)  # layers and heads are whole numbers (no -0.5, 1.5 ticks)
        fig.update_xaxes(title_text="head", row=1, col=i + 1, **whole)
        fig.update_yaxes(autorange="reversed", title_text="layer" if i == 0 else None, row=1, col=i + 1, **whole)
    return finish(fig, "sink_maps", height=110 + 34 * n_layer, top=50)
