"""Figures of the Ablation page: the prediction before and after removing heads, and which later heads changed."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from ..ablation import Ablation
from .common import escape, f32, finish, readable_tokens

BEFORE, AFTER = "#636efa", "#ef553b"  # the two bars of a token: with the heads, without them
CHANGE_SCALE = "Cividis"  # sequential from 0 (no change); set explicitly with zmin/zmax
REMOVED = "#ff4b4b"


def prediction_bars(result: Ablation) -> go.Figure:
    """The top tokens' probabilities with the heads and without them, one pair of bars per token (most likely before
    at the top). Tokens sit on positional rows: two tokens that look alike stay two rows."""
    top = result.top
    rows = list(range(len(top)))
    names = [escape(name) for name in readable_tokens([t.token for t in top])]  # "Ġcat" reads "·cat"
    fig = go.Figure()
    for label, colour, values in (
        ("before", BEFORE, [t.before for t in top]),
        ("after", AFTER, [t.after for t in top]),
    ):
        fig.add_trace(
            go.Bar(
                y=rows,
                x=f32(values),
                orientation="h",
                name=label,
                marker_color=colour,
                customdata=names,
                hovertemplate="%{customdata}: %{x:.4f} " + label + "<extra></extra>",
            )
        )
    fig.update_yaxes(tickmode="array", tickvals=rows, ticktext=names, autorange="reversed", title_text="token")
    fig.update_xaxes(title_text="probability", rangemode="tozero")
    finish(fig, "ablation_prediction", height=110 + 26 * len(top), top=40, barmode="group")
    fig.update_layout(legend=dict(y=1.02, x=1, xanchor="right"))
    fig.update_layout(
        meta={"figure": "ablation_prediction", "heads": [list(h) for h in result.heads], "mode": result.mode}
    )
    return fig


def change_grid(change: np.ndarray, result: Ablation, title: str) -> go.Figure:
    """[layer, head] Jensen-Shannon divergence of each head's attention after vs before; removed heads outlined,
    layers the ablation cannot reach (up to the first removed one) marked as unchanged by construction."""
    v = f32(change)
    n_layer, n_head = v.shape
    top = float(max(np.nanmax(v), 1e-9))
    fig = go.Figure(
        go.Heatmap(
            z=v,
            x=list(range(n_head)),
            y=list(range(n_layer)),
            colorscale=CHANGE_SCALE,
            zmin=0.0,
            zmax=top,
            text=np.char.mod("%.3g", v.astype(np.float64)),
            texttemplate="%{text}" if v.size <= 256 else None,
            hovertemplate="layer %{y}, head %{x}<br>JSD after vs before = %{z:.5f} nats<extra></extra>",
            colorbar=dict(title=dict(text="JSD (nats)", side="right"), tickformat=".2~g"),
        )
    )
    for layer, head in result.heads:
        fig.add_shape(
            type="rect", x0=head - 0.5, x1=head + 0.5, y0=layer - 0.5, y1=layer + 0.5, line=dict(color=REMOVED, width=3)
        )
    first = result.first_changed_layer
    if first > 0:  # layers the removed heads cannot reach: their attention is the same by construction
        fig.add_shape(
            type="rect",
            x0=-0.5,
            x1=n_head - 0.5,
            y0=-0.5,
            y1=first - 0.5,
            line=dict(width=0),
            fillcolor="rgba(200,200,200,0.55)",
        )
    fig.update_xaxes(title_text="head", tickmode="array", tickvals=list(range(n_head)), constrain="domain")
    fig.update_yaxes(title_text="layer", tickmode="array", tickvals=list(range(n_layer)), autorange="reversed")
    # at least 260 px: with two layers the colour bar was ~70 px tall and its tick labels ran into each other
    finish(fig, "ablation_change", height=max(260, 110 + 40 * n_layer), top=50, title=dict(text=title))
    fig.update_layout(meta={"figure": "ablation_change", "heads": [list(h) for h in result.heads], "mode": result.mode})
    return fig


def head_picker(n_layer: int, n_head: int, removed) -> go.Figure:
    """A layer x head grid of squares to click: one square per head (customdata [layer, head], as the Heads page's
    overview), the `removed` heads filled red, the others outlined. The dashboard toggles the clicked head."""
    removed = {(int(layer), int(head)) for layer, head in removed}
    layer, head = np.meshgrid(np.arange(n_layer), np.arange(n_head), indexing="ij")
    gone = np.array([(a, b) in removed for a, b in zip(layer.ravel(), head.ravel())])
    cell = int(max(10, min(30, 760 / max(n_head, 1), 560 / max(n_layer, 1))))  # squares fill a ~760 x 560 px grid
    # at least 340 px wide: the modebar stays clear of the "head" title on a model with few heads
    fig = go.Figure(
        go.Scatter(
            x=head.ravel().astype(np.int32),
            y=layer.ravel().astype(np.int32),
            customdata=[[int(a), int(b)] for a, b in zip(layer.ravel(), head.ravel())],  # plain lists: selected_tile
            mode="markers",
            name="heads",
            showlegend=False,
            marker=dict(
                symbol="square",
                size=cell * 0.8,
                color=np.where(gone, REMOVED, "rgba(0,0,0,0)").tolist(),
                line=dict(color=np.where(gone, REMOVED, "#9a9aa8").tolist(), width=1.5),
            ),
            selected=dict(marker=dict(opacity=1)),
            unselected=dict(marker=dict(opacity=1)),  # no dimming on a click
            hovertemplate=[
                f"L{a} H{b}: click to {'put it back' if g else 'remove it'}<extra></extra>"
                for a, b, g in zip(layer.ravel(), head.ravel(), gone)
            ],
        )
    )
    fig.update_xaxes(
        title_text="head",
        tickmode="array",
        tickvals=list(range(0, n_head, max(1, n_head // 16))),
        range=[-0.6, n_head - 0.4],
        side="top",
        showgrid=False,
        zeroline=False,
        fixedrange=True,
    )
    fig.update_yaxes(
        title_text="layer",
        tickmode="array",
        tickvals=list(range(0, n_layer, max(1, n_layer // 16))),
        range=[n_layer - 0.4, -0.6],
        showgrid=False,
        zeroline=False,
        fixedrange=True,
    )
    finish(
        fig,
        "ablation_picker",
        height=cell * n_layer + 90,
        top=60,
        margin=dict(l=60, r=10, t=60, b=10),
        width=max(340, cell * n_head + 90),
        meta={"removed": sorted([list(h) for h in removed])},
    )
    return fig
