"""Figures of the Score functions page: score histograms, weights side by side, spread against width."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..analysis.stats import Histogram, histogram
from .common import WEIGHTS_SCALE, f32, finish, ticks
from .windows import axis_ranges, range_note, window

LABELS = {"dot": "dot", "scaled_dot": "scaled dot", "general": "general (bilinear)", "additive": "additive"}
#: One colour per score function on every chart of the page; saturated enough for both themes.
COLOURS = {"dot": "#1f77b4", "scaled_dot": "#2ca02c", "general": "#d62728", "additive": "#9467bd"}
LOG_TICKS = [0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000]  # log axes labelled 1-2-5, not 2, 5


def score_histograms(results: dict, bins: int = 40, what: str = "score", figure: str = "score_histograms") -> go.Figure:
    """One panel per score function: the distribution of its scores (binned here, not in the browser, unless
    `results` holds them binned already: a Histogram in place of the scores).

    `what` names the values on the x axes (e.g. "softmax input" for scores times the scale)."""
    names = list(results)
    fig = make_subplots(rows=1, cols=len(names), subplot_titles=[LABELS[n] for n in names], horizontal_spacing=0.06)
    for col, name in enumerate(names, start=1):
        h = results[name][0]
        h = h if isinstance(h, Histogram) else histogram(np.asarray(h), bins=bins)
        fig.add_trace(
            go.Bar(
                x=f32(h.centers),
                y=h.counts,
                width=h.width,
                name=LABELS[name],
                showlegend=False,
                marker_color=COLOURS[name],
            ),
            row=1,
            col=col,
        )
        fig.update_xaxes(title_text=f"{what} (std {np.sqrt(h.var):.2f})", row=1, col=col)
    # the first x label sits at the corner, under the y axis' "0": moved apart, they no longer touch
    fig.update_xaxes(ticklabelstandoff=8)
    fig.update_yaxes(ticklabelstandoff=4)
    fig.update_yaxes(title_text="count", row=1, col=1)
    return finish(fig, figure, 300, margin=dict(l=60, r=20, t=40, b=50), bargap=0)


def weights_side_by_side(
    results: dict, tokens=None, key_tokens=None, figure: str = "score_weights", token_range=None, shape=None
) -> go.Figure:
    """One 0..1 heatmap of softmax weights per score function (rows: queries, columns: keys).

    With `tokens` the axes are labelled '%02d token' (keys under every panel, queries on the first), and a long text
    shows a window of at most MAX_SHOWN tokens per axis (`token_range`: one range or a Window; the first ones by
    default), said in the titles. shape: the whole (queries, keys) when the weights in `results` are that window
    already (analysis.scores.head_window)."""
    names = list(results)
    n_q, n_k = np.shape(results[names[0]][1]) if shape is None else shape
    (q0, q1), (k0, k1) = drawn_window(n_q, n_k, token_range)
    cut = range_note(n_q, n_k, (q0, q1), (k0, k1)).replace(" · ", "<br>", 1)
    titles = [LABELS[n] + cut for n in names]
    fig = make_subplots(rows=1, cols=len(names), subplot_titles=titles, horizontal_spacing=0.04)
    for col, name in enumerate(names, start=1):
        w = np.asarray(results[name][1])
        w = w if shape is not None else w[q0:q1, k0:k1]
        fig.add_trace(
            go.Heatmap(
                z=f32(w),
                x0=k0,
                dx=1,
                y0=q0,
                dy=1,
                colorscale=WEIGHTS_SCALE,
                zmin=0.0,
                zmax=1.0,
                showscale=col == len(names),
                hovertemplate="query %{y}, key %{x}: %{z:.3f}<extra></extra>",
            ),
            row=1,
            col=col,
        )
        fig.update_yaxes(
            autorange="reversed", showticklabels=col == 1, title_text="query" if col == 1 else None, row=1, col=col
        )
        fig.update_xaxes(title_text="key", row=1, col=col)
        if tokens is not None:
            _label_axes(fig, tokens, tokens if key_tokens is None else key_tokens, col, (q0, q1), (k0, k1))
    labelled = tokens is not None
    margin = dict(l=100 if labelled else 40, r=20, t=60 if cut else 40, b=100 if labelled else 40)
    return finish(fig, figure, 380 if labelled else 320, margin=margin)


def drawn_window(n_queries: int, n_keys: int, token_range=None) -> tuple[tuple[int, int], tuple[int, int]]:
    """The (queries, keys) that `weights_side_by_side` draws of [n_queries, n_keys] weights for `token_range`."""
    rows, cols = axis_ranges(token_range)
    return window(n_queries, rows), window(n_keys, cols)


def _label_axes(fig: go.Figure, tokens, key_tokens, col: int, rows: tuple, cols: tuple) -> None:
    """Token tick labels on one panel for positions rows / cols ((start, stop)), thinned to 16 per axis, so four
    narrow panels stay legible."""
    for axis, toks, (a, b), show in (
        (fig.update_xaxes, key_tokens, cols, True),
        (fig.update_yaxes, tokens, rows, col == 1),
    ):
        axis(**ticks(toks, a, b, 10), showticklabels=show, tickfont_size=10, row=1, col=col)
    fig.update_xaxes(tickangle=-90, row=1, col=col)  # upright: four panels leave ~15 px per label


def spread_lines(dims, spread: dict) -> go.Figure:
    """Std of each score function's scores against the vector width d (log-log). general is dashed: it climbs
    with dot and would hide it."""
    fig = go.Figure(
        [
            go.Scatter(
                x=list(dims),
                y=v,
                mode="lines+markers",
                name=LABELS[n],
                line=dict(color=COLOURS[n], dash="dash" if n == "general" else "solid", width=2.5),
            )
            for n, v in spread.items()
        ]
    )
    values = [x for v in spread.values() for x in v if x > 0]
    low, high = min(values) / 1.5, max(values) * 1.5
    fig.update_layout(
        xaxis=dict(type="log", title="width d", tickmode="array", tickvals=list(dims), ticktext=[str(d) for d in dims]),
        yaxis=dict(
            type="log", title="std of the scores", tickmode="array", tickvals=[t for t in LOG_TICKS if low <= t <= high]
        ),
    )
    return finish(
        fig,
        "score_spread",
        340,
        margin=dict(l=60, r=20, t=40, b=50),
        legend=dict(orientation="h", yanchor="bottom", y=1.02, xanchor="left", x=0),
    )
