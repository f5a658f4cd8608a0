"""Figures of the Rollout page besides its matrices (those are headstats.weights_matrix): rollout and flow bars."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from .common import f32, finish, tick_labels, ticks

ROLLOUT_COLOUR, FLOW_COLOUR = "#4c78a8", "#f58518"


def flow_bars(tokens, rollout_row: np.ndarray, flow: np.ndarray, query: int) -> go.Figure:
    """For one output token: what rollout gives each input token, beside its share of the maximum flows.

    Two bar series on one axis, both summing to 1 (flow normalised as in analysis.rollout.flow); the bars sit at
    token positions with '%02d token' labels (escaped), so repeated tokens stay apart.
    """
    labels = tick_labels(tokens)
    x = list(range(len(tokens)))
    fig = go.Figure(
        [
            go.Bar(name="rollout", x=x, y=f32(rollout_row), marker_color=ROLLOUT_COLOUR),
            go.Bar(name="flow", x=x, y=f32(flow), marker_color=FLOW_COLOUR),
        ]
    )
    fig.update_layout(
        barmode="group",
        title=dict(text=f"Output token {labels[query]}: where it draws from", x=0, xanchor="left"),
        yaxis=dict(title="share (each series sums to 1)", rangemode="tozero"),
        xaxis=dict(title="input token", **ticks(labels=labels), tickangle=-60),
    )
    return finish(
        fig,
        "flow",
        400,
        margin=dict(l=60, r=20, t=60, b=90),
        meta={"query": int(query)},
        legend=dict(orientation="h", yanchor="bottom", y=1.0, xanchor="right", x=1),
    )
