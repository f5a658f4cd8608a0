"""Figures of the Neuron view: a query vector, every key vector and their elementwise products."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .common import SCORES_SCALE, escape, f32, symmetric_range, tick_labels


def _panel(z: np.ndarray, ylabels, hover: str, colorbar_x: float) -> go.Heatmap:
    r = symmetric_range(z) or 1.0
    return go.Heatmap(
        z=f32(z),
        y=list(range(z.shape[0])),
        colorscale=SCORES_SCALE,
        zmin=-r,
        zmax=r,
        zmid=0.0,
        customdata=np.broadcast_to(np.array(ylabels, dtype=object)[:, None], z.shape),
        hovertemplate=hover + "%{customdata}, dimension %{x}: %{z:.4f}<extra></extra>",
        colorbar=dict(x=colorbar_x, len=0.8, thickness=10),
    )


def vectors(view, tokens, key_tokens) -> go.Figure:
    """q (top), then k_j for every key (left) and q * k_j (right): one row per key, one column per dimension.

    The sum of a right-hand row is that key's score; red adds to it, blue takes away.
    """
    keys = tick_labels(key_tokens)
    n_key = len(keys)
    fig = make_subplots(
        rows=2, cols=2, row_heights=[0.12, 0.88], vertical_spacing=0.08, horizontal_spacing=0.1,
        specs=[[{"colspan": 2}, None], [{}, {}]],
        subplot_titles=(f"query vector q of {escape(tokens[view.query])}", "key vectors k", "q × k (elementwise)"),
    )  # fmt: skip
    fig.add_trace(_panel(view.q[None, :], [escape(tokens[view.query])], "q ", 1.0), row=1, col=1)
    fig.add_trace(_panel(view.k, keys, "k ", 0.44), row=2, col=1)
    fig.add_trace(_panel(view.product, keys, "q×k ", 1.0), row=2, col=2)
    ticks = dict(tickmode="array", tickvals=list(range(n_key)), ticktext=keys, autorange="reversed")
    fig.update_yaxes(**ticks, row=2, col=1)
    fig.update_yaxes(**ticks, showticklabels=False, row=2, col=2)
    fig.update_yaxes(showticklabels=False, row=1, col=1)
    fig.update_xaxes(title_text="dimension", row=2)
    fig.update_layout(
        height=max(360, 160 + 22 * n_key),
        margin=dict(l=90, r=20, t=50, b=50),
        meta={"figure": "neuron_vectors", "layer": view.layer, "head": view.head, "query": view.query},
    )
    return fig
