"""Figures of the Score functions page: score histograms, weights side by side, spread against width."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..analysis.stats import histogram
from .common import WEIGHTS_SCALE, f32

LABELS = {"dot": "dot", "scaled_dot": "scaled dot", "general": "general (bilinear)", "additive": "additive"}


def score_histograms(results: dict, bins: int = 40) -> go.Figure:
    """One panel per score function: the distribution of its scores (binned here, not in the browser)."""
    names = list(results)
    fig = make_subplots(rows=1, cols=len(names), subplot_titles=[LABELS[n] for n in names], horizontal_spacing=0.06)
    for col, name in enumerate(names, start=1):
        h = histogram(np.asarray(results[name][0]), bins=bins)
        fig.add_trace(
            go.Bar(x=f32(h.centers), y=h.counts, width=h.width, name=LABELS[name], showlegend=False),
            row=1,
            col=col,
        )
        fig.update_xaxes(title_text=f"score (std {np.sqrt(h.var):.2f})", row=1, col=col)
    fig.update_layout(height=300, bargap=0, margin=dict(l=40, r=20, t=40, b=50), meta={"figure": "score_histograms"})
    return fig


def weights_side_by_side(results: dict) -> go.Figure:
    """One 0..1 heatmap of softmax weights per score function (rows: queries, columns: keys)."""
    names = list(results)
    fig = make_subplots(rows=1, cols=len(names), subplot_titles=[LABELS[n] for n in names], horizontal_spacing=0.04)
    for col, name in enumerate(names, start=1):
        w = np.asarray(results[name][1])
        fig.add_trace(
            go.Heatmap(z=f32(w), colorscale=WEIGHTS_SCALE, zmin=0.0, zmax=1.0, showscale=col == len(names),
                       hovertemplate="query %{y}, key %{x}: %{z:.3f}<extra></extra>"),
            row=1, col=col,
        )  # fmt: skip
        fig.update_yaxes(autorange="reversed", row=1, col=col)
    fig.update_layout(height=320, margin=dict(l=40, r=20, t=40, b=40), meta={"figure": "score_weights"})
    return fig


def spread_lines(dims, spread: dict) -> go.Figure:
    """Std of each score function's scores against the vector width d (log-log)."""
    fig = go.Figure([go.Scatter(x=list(dims), y=v, mode="lines+markers", name=LABELS[n]) for n, v in spread.items()])
    fig.update_layout(
        xaxis=dict(type="log", title="width d"),
        yaxis=dict(type="log", title="std of the scores"),
        height=340,
        meta={"figure": "score_spread"},
    )
    return fig
