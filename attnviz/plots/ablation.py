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
                y=rows, x=f32(values), orientation="h", name=label, marker_color=colour, customdata=names,
                hovertemplate="%{customdata}: %{x:.4f} " + label + "<extra></extra>",
            )
        )  # fmt: skip
    fig.update_yaxes(tickmode="array", tickvals=rows, ticktext=names, autorange="reversed", title_text="token")
    fig.update_xaxes(title_text="probability", rangemode="tozero")
    finish(fig, "ablation_prediction", height=110 + 26 * len(top), top=40, barmode="group")
    fig.update_layout(legend=dict(y=1.02, x=1, xanchor="right"))
    fig.update_layout(meta={"figure": "ablation_prediction", "heads": [list(h) for h in result.heads],
                            "mode": result.mode})  # fmt: skip
    return fig


def change_grid(change: np.ndarray, result: Ablation, title: str) -> go.Figure:
    """[layer, head] Jensen-Shannon divergence of each head's attention after vs before; removed heads outlined,
    layers the ablation cannot reach (up to the first removed one) marked as unchanged by construction."""
    v = f32(change)
    n_layer, n_head = v.shape
    top = float(max(np.nanmax(v), 1e-9))
    fig = go.Figure(
        go.Heatmap(
            z=v, x=list(range(n_head)), y=list(range(n_layer)), colorscale=CHANGE_SCALE, zmin=0.0, zmax=top,
            text=np.char.mod("%.3g", v.astype(np.float64)), texttemplate="%{text}" if v.size <= 256 else None,
            hovertemplate="layer %{y}, head %{x}<br>JSD after vs before = %{z:.5f} nats<extra></extra>",
            colorbar=dict(title=dict(text="JSD (nats)", side="right"), tickformat=".2~g"),
        )
    )  # fmt: skip
    for layer, head in result.heads:
        fig.add_shape(type="rect", x0=head - 0.5, x1=head + 0.5, y0=layer - 0.5, y1=layer + 0.5,
                      line=dict(color=REMOVED, width=3))  # fmt: skip
    first = result.first_changed_layer
    if first > 0:  # layers the removed heads cannot reach: their attention is the same by construction
        fig.add_shape(type="rect", x0=-0.5, x1=n_head - 0.5, y0=-0.5, y1=first - 0.5, line=dict(width=0),
                      fillcolor="rgba(200,200,200,0.55)")  # fmt: skip
    fig.update_xaxes(title_text="head", tickmode="array", tickvals=list(range(n_head)), constrain="domain")
    fig.update_yaxes(title_text="layer", tickmode="array", tickvals=list(range(n_layer)), autorange="reversed")
    # at least 260 px: with two layers the colour bar was ~70 px tall and its tick labels ran into each other
    finish(fig, "ablation_change", height=max(260, 110 + 40 * n_layer), top=50, title=dict(text=title))
    fig.update_layout(meta={"figure": "ablation_change", "heads": [list(h) for h in result.heads],
                            "mode": result.mode})  # fmt: skip
    return fig
