"""Figures of the Neuron view: a query vector, every key vector and their elementwise products."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .common import SCORES_SCALE, escape, f32, finish, readable_tokens, symmetric_range, tick_labels, ticks


def _panel(z: np.ndarray, ylabels, hover: str, axis: str) -> go.Heatmap:
    return go.Heatmap(
        z=f32(z),
        y=list(range(z.shape[0])),
        coloraxis=axis,
        customdata=np.broadcast_to(np.array(ylabels, dtype=object)[:, None], z.shape),
        hovertemplate=hover + "%{customdata}, dimension %{x}: %{z:.4f}<extra></extra>",
    )


def _axis(values, title: str, x: float) -> dict:
    """A diverging colour axis centred on 0 whose bar sits beside the lower row only (the upper one is a strip)."""
    r = max(symmetric_range(np.concatenate([np.ravel(v) for v in values])), 1e-9)
    bar = dict(title=dict(text=title, side="right"), x=x, y=0.4, yanchor="middle", len=0.75, thickness=10)
    return dict(colorscale=SCORES_SCALE, cmin=-r, cmax=r, cmid=0.0, colorbar=bar)


def vectors(view, tokens, key_tokens) -> go.Figure:
    """q (top), then k_j for every key (left) and q * k_j (right): one row per key, one column per dimension.

    The sum of a right-hand row is that key's score; red adds to it, blue takes away. q and k share one colour
    scale (bar between the panels), the products another (bar on the right).
    """
    labels = tick_labels(key_tokens)  # once: per key it cost T² escapes, 30 s at 2,048 tokens
    keys = [labels[j] for j in view.keys]  # the keys the view holds (a window on long texts)
    query = escape(readable_tokens(tokens)[view.query])
    n_key = len(keys)
    row = 22 if n_key <= 40 else 12
    fig = make_subplots(
        rows=2,
        cols=2,
        row_heights=[0.12, 0.88],
        vertical_spacing=0.1,
        horizontal_spacing=0.14,
        specs=[[{"colspan": 2}, None], [{}, {}]],
        subplot_titles=(f"query vector q of {query}", "key vectors k", "q × k (elementwise)"),
    )
    fig.add_trace(_panel(view.q[None, :], [query], "q ", "coloraxis"), row=1, col=1)
    fig.add_trace(_panel(view.k, keys, "k ", "coloraxis"), row=2, col=1)
    fig.add_trace(_panel(view.product, keys, "q×k ", "coloraxis2"), row=2, col=2)
    key_ticks = ticks(labels=keys, most=40) | dict(autorange="reversed")  # at most 40 key labels: more would overlap
    fig.update_yaxes(**key_ticks, row=2, col=1)
    fig.update_yaxes(**key_ticks, showticklabels=False, row=2, col=2)
    fig.update_yaxes(showticklabels=False, row=1, col=1)
    fig.update_xaxes(showticklabels=False, row=1, col=1)  # its numbers would run into the titles below
    fig.update_xaxes(title_text="dimension", row=2)
    meta = dict(layer=view.layer, head=view.head, query=view.query, keys=[int(view.keys[0]), int(view.keys[-1]) + 1])
    return finish(
        fig,
        "neuron_vectors",
        max(380, 180 + row * n_key),
        margin=dict(l=90, r=20, t=50, b=50),
        meta=meta,
        coloraxis=_axis([view.q, view.k], "q, k", 0.45),
        coloraxis2=_axis([view.product], "q × k", 1.0),
    )
