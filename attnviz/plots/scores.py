"""Figures of the Score functions page: score histograms, weights side by side, spread against width."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from ..analysis.stats import Histogram, histogram
from .common import WEIGHTS_SCALE, f32, finish, ticks
from .panels import panel_axes, panel_axis_dicts, row_layout
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
    layout = _panels([LABELS[n] for n in names], 0.06)
    data = []
    for i, name in enumerate(names):
        h = results[name][0]
        h = h if isinstance(h, Histogram) else histogram(np.asarray(h), bins=bins)
        x, y = panel_axis_dicts(layout, i)
        # the first x label sits at the corner, under the y axis' "0": moved apart, they no longer touch
        x |= dict(title=dict(text=f"{what} (std {np.sqrt(h.var):.2f})"), ticklabelstandoff=8)
        y |= dict(ticklabelstandoff=4) | (dict(title=dict(text="count")) if i == 0 else {})
        bars = dict(x=f32(h.centers), y=h.counts, width=h.width, name=LABELS[name], marker=dict(color=COLOURS[name]))
        data.append(dict(type="bar", showlegend=False, **bars, **panel_axes(i)))
    return finish(dict(data=data, layout=layout), figure, 300, margin=dict(l=60, r=20, t=40, b=50), bargap=0)


def weights_side_by_side(
    results: dict,
    tokens=None,
    key_tokens=None,
    figure: str = "score_weights",
    token_range=None,
    shape=None,
    top: float | None = 1.0,
) -> go.Figure:
    """One 0..1 heatmap of softmax weights per score function (rows: queries, columns: keys).

    With `tokens` the axes are labelled '%02d token' (keys under every panel, queries on the first), and a long text
    shows a window of at most MAX_SHOWN tokens per axis (`token_range`: one range or a Window; the first ones by
    default), said in the titles. shape: the whole (queries, keys) when the weights in `results` are that window
    already (analysis.scores.head_window). top: the weight at the top of the one colour scale all panels share; None:
    the largest weight drawn (a long text's rows spread over many keys: a scale to 1 would draw them all dark)."""
    names = list(results)
    n_q, n_k = np.shape(results[names[0]][1]) if shape is None else shape
    (q0, q1), (k0, k1) = drawn_window(n_q, n_k, token_range)
    cut = range_note(n_q, n_k, (q0, q1), (k0, k1)).replace(" · ", "<br>", 1)
    drawn = [np.asarray(results[n][1]) for n in names]
    drawn = drawn if shape is not None else [w[q0:q1, k0:k1] for w in drawn]
    top = (max(float(w.max()) for w in drawn) or 1.0) if top is None else top
    layout, data = _panels([LABELS[n] + cut for n in names], 0.04), []
    for title in layout["annotations"]:  # clear of the first query's label, which rises above the top row's cells
        title["yshift"] = 6
    for i, w in enumerate(drawn):
        cells = dict(z=f32(w), x0=k0, dx=1, y0=q0, dy=1, colorscale=WEIGHTS_SCALE, zmin=0.0, zmax=float(top))
        hover = "query %{y}, key %{x}: %{z:.3g}<extra></extra>"  # 3 significant digits: long rows hold ~0.0005
        data.append(dict(type="heatmap", **cells, showscale=i == len(names) - 1, hovertemplate=hover, **panel_axes(i)))
        x, y = panel_axis_dicts(layout, i)
        x["title"] = dict(text="key")
        y |= dict(autorange="reversed", showticklabels=i == 0) | (dict(title=dict(text="query")) if i == 0 else {})
        if tokens is not None:  # thinned to 10 a panel and upright, so four narrow panels stay legible
            x |= ticks(key_tokens if key_tokens is not None else tokens, k0, k1, 10) | dict(tickfont=dict(size=10))
            y |= ticks(tokens, q0, q1, 10) | dict(tickfont=dict(size=10))
            x["tickangle"] = -90
    labelled = tokens is not None
    margin = dict(l=100 if labelled else 40, r=20, t=60 if cut else 40, b=100 if labelled else 40)
    return finish(dict(data=data, layout=layout), figure, 380 if labelled else 320, margin=margin)


def _panels(titles: list[str], spacing: float) -> dict:
    """The layout of one row of panels, one per title, each with its own axes (make_subplots(1, n)'s), as dicts.
    Margins are fixed (automargin off): Plotly's margin passes were a third of the browser's time drawing these
    charts (Chromium, 2026-11-26); `finish` gives the room every label takes (margins.room) and makes the Figure
    (unvalidated: see finish)."""
    layout = row_layout(titles, spacing)
    for name in (k for k in layout if k.startswith(("xaxis", "yaxis"))):
        layout[name]["automargin"] = False
    return layout


def drawn_window(n_queries: int, n_keys: int, token_range=None) -> tuple[tuple[int, int], tuple[int, int]]:
    """The (queries, keys) that `weights_side_by_side` draws of [n_queries, n_keys] weights for `token_range`."""
    rows, cols = axis_ranges(token_range)
    return window(n_queries, rows), window(n_keys, cols)


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
    ticks_x = dict(tickmode="array", tickvals=list(dims), ticktext=[str(d) for d in dims])
    ticks_y = dict(tickmode="array", tickvals=[t for t in LOG_TICKS if low <= t <= high])
    fig.update_layout(  # fixed margins, as _panels: no second layout pass in the browser
        xaxis=dict(type="log", title="width d", automargin=False, **ticks_x),
        yaxis=dict(type="log", title="std of the scores", automargin=False, **ticks_y),
    )
    return finish(
        fig,
        "score_spread",
        340,
        margin=dict(l=60, r=20, t=40, b=50),
        legend=dict(orientation="h", yanchor="bottom", y=1.02, xanchor="left", x=0),
    )
