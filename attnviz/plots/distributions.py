"""Figures for the Scaling and Masks pages: histograms, softmax comparisons, the 1/sqrt(d) law, mask effects.

Input is what `attnviz.analysis` computed; output is a plotly Figure. Never calls streamlit.
Every figure names itself in `layout.meta["figure"]` so tests (and exports) can find it.
"""

from __future__ import annotations

import math

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..analysis.law import LawRow
from ..analysis.scaling import ScalingComparison
from ..analysis.stats import normal_curve
from .common import (
    INK,
    f32,
    finish,
    grid_height,
    group,
    group_edges,
    group_labels,
    group_note,
    heatmap,
    ticks,
    token_axes,
    weights_axis,
)

RAW_COLOUR = "#d62728"  # softmax of raw scores: red, the "too hot" one
SCALED_COLOUR = "#1f77b4"
# --- Scaling page -----------------------------------------------------------------------------------------


def score_histograms(cmp: ScalingComparison, d_head: int, scale_text: str) -> go.Figure:
    """scores vs scores x scale as server-side binned bars, each with N(0, observed variance) and the
    textbook reference (unit-variance q and k): N(0, d) before, N(0, d x scale²) after, i.e. N(0, 1) at 1/sqrt(d)."""
    titles = ("<b>scores</b> = q·k (scale 1)", f"<b>scaled</b> = scores × {scale_text}")
    fig = make_subplots(rows=1, cols=2, subplot_titles=titles, horizontal_spacing=0.08)
    for col, (h, theory, colour) in enumerate(
        ((cmp.hist_scores, float(d_head), RAW_COLOUR), (cmp.hist_scaled, d_head * cmp.scale**2, SCALED_COLOUR)), start=1
    ):
        fig.add_trace(
            go.Bar(
                x=f32(h.centers),
                y=h.counts,
                width=h.width,
                marker_color=colour,
                opacity=0.55,
                name="count" if col == 1 else "count (scaled)",
                showlegend=False,
                hovertemplate="%{x:.2f}: %{y} cells<extra></extra>",
            ),
            row=1,
            col=col,
        )
        for var, dash, label in (
            (h.var, "solid", "N(0, observed variance)"),
            (theory, "dot", "N(0, d × scale²): unit-variance q, k"),
        ):
            x, y = normal_curve(h, var)
            fig.add_trace(
                go.Scatter(
                    x=f32(x),
                    y=f32(y),
                    mode="lines",
                    line=dict(color=INK, dash=dash, width=1.6),
                    name=label,
                    legendgroup=label,
                    showlegend=col == 1,
                    hoverinfo="skip",
                ),
                row=1,
                col=col,
            )
        fig.add_annotation(
            text=f"mean {h.mean:.2f}<br>variance {h.var:.2f}<br>({h.n:,} cells)",
            xref="x domain" if col == 1 else "x2 domain",
            yref="y domain" if col == 1 else "y2 domain",
            x=0.98,
            y=0.95,
            showarrow=False,
            align="right",
            bgcolor="rgba(255,255,255,0.85)",
            font_color=INK,
        )
    peak = max(int(cmp.hist_scores.counts.max(initial=1)), int(cmp.hist_scaled.counts.max(initial=1)))
    fig.update_yaxes(title_text="cells", row=1, col=1)
    fig.update_yaxes(range=[0, peak * 1.15])  # the theory curve can spike far above real data: keep the bars in view
    # one x axis for both (zoom one, the other follows): on axes of their own the two histograms looked alike and
    # the shrink the page teaches showed only in the tick labels
    hists = (cmp.hist_scores, cmp.hist_scaled)
    low = min(float(h.centers.min()) - h.width / 2 for h in hists)
    high = max(float(h.centers.max()) + h.width / 2 for h in hists)
    fig.update_xaxes(title_text="value", range=[low, high])
    fig.update_xaxes(matches="x", row=1, col=2)
    return finish(fig, "score_histograms", 380, bargap=0)


def softmax_pair(cmp: ScalingComparison, tokens, head_label: str, scale_text: str) -> go.Figure:
    """softmax(scores) next to softmax(scores x scale), 0..1 on one colour scale: saturation shows as one bright cell
    per row. Long texts show the comparison's window of tokens (`cmp.window`), each row still the softmax over every
    key; the title says which tokens."""
    start, stop = cmp.window
    part = "" if (start, stop) == (0, len(tokens)) else f"<br>tokens {start}–{stop - 1} of {len(tokens):,}"
    titles = (f"softmax(scores): scale 1, {head_label}{part}", f"softmax(scores × {scale_text}), {head_label}{part}")
    fig = make_subplots(rows=1, cols=2, subplot_titles=titles, horizontal_spacing=0.1)
    fig.update_annotations(yshift=8)  # subplot titles clear of the plot frame
    for col, (w, name) in enumerate(
        ((cmp.raw_weights, "softmax raw"), (cmp.rescaled_weights, "softmax scaled")), start=1
    ):
        z = w.mean(axis=0)  # the window's weights, averaged over the heads shown
        fig.add_trace(heatmap(z, tokens, "coloraxis", "weight", name, start=start), row=1, col=col)
        token_axes(fig, tokens, 1, col, show_y=col == 1, start=start, stop=stop)
    return finish(fig, "softmax_pair", grid_height(stop - start, 2), top=70 if part else 50, coloraxis=weights_axis())


def row_saturation(cmp: ScalingComparison, tokens, scale_text: str) -> go.Figure:
    """Per query row: the largest weight (1 = one-hot) and the entropy (0 = one-hot, log n = uniform), raw vs scaled.

    With several heads, each point is the mean over those heads. More than LONG_CHART queries are averaged in groups
    of consecutive queries (the hover gives each group's range; `row_saturation_note` says so)."""
    edges = group_edges(len(tokens))
    labels = group_labels(tokens, edges)
    x = np.arange(len(labels))
    fig = make_subplots(
        rows=1, cols=2, subplot_titles=("largest weight per row", "entropy per row (nats)"), horizontal_spacing=0.08
    )
    series = (
        (cmp.max_raw, cmp.entropy_raw, "scale 1 (raw scores)", RAW_COLOUR),
        (cmp.max_rescaled, cmp.entropy_rescaled, f"scale {scale_text}", SCALED_COLOUR),
    )
    for mx, ent, name, colour in series:
        for col, vals in ((1, mx), (2, ent)):
            per_query = vals.mean(axis=0)
            low, high = group(per_query, edges, "min"), group(per_query, edges, "max")
            text = [f"{a:.3f}–{b:.3f}" for a, b in zip(low, high)] if len(labels) < len(tokens) else None
            fig.add_trace(
                go.Scatter(
                    x=x,
                    y=f32(group(per_query, edges, "mean")),
                    mode="lines+markers",
                    name=name,
                    legendgroup=name,
                    showlegend=col == 1,
                    line=dict(color=colour),
                    customdata=labels,
                    text=text,
                    hovertemplate="%{customdata}: %{y:.3f}"
                    + (" (mean; range %{text})" if text else "")
                    + "<extra>"
                    + name
                    + "</extra>",
                ),
                row=1,
                col=col,
            )
    uniform = math.log(len(tokens))
    fig.add_hline(
        y=uniform,
        line=dict(dash="dot", color="#6b6b6b"),
        row=1,
        col=2,
        annotation_text=f"uniform = log {len(tokens)}",
        annotation_position="top right",
    )
    fig.add_hline(
        y=1.0,
        line=dict(dash="dot", color="#6b6b6b"),
        row=1,
        col=1,
        annotation_text="one-hot",
        annotation_position="top right",
    )
    fig.update_yaxes(range=[0, 1.12], row=1, col=1)
    fig.update_yaxes(range=[0, uniform * 1.12], row=1, col=2)
    what = "query" if len(labels) == len(tokens) else "queries (groups)"
    fig.update_xaxes(**ticks(labels=labels, most=16), tickangle=-60, title_text=what)  # two panels: ~25 px each
    return finish(fig, "row_saturation", 380)


def law_figure(rows: list[LawRow], d_head: int | None = None) -> go.Figure:
    """The random-vector experiment: Var(q·k) = d (log axes, with the line y = d), scaled variance flat at 1,
    and what the softmax does: unscaled max weight rises to 1 and entropy falls to 0; scaled stays put."""
    d = np.array([r.d for r in rows], dtype=np.float32)
    col = lambda name: f32([getattr(r, name) for r in rows])  # noqa: E731
    titles = ("variance of q·k", "mean largest softmax weight", "mean row entropy (nats)")
    fig = make_subplots(rows=1, cols=3, subplot_titles=titles, horizontal_spacing=0.07)
    raw, scaled = "q·k (unscaled)", "q·k ÷ √d (scaled)"
    band = dict(color="rgba(0,0,0,0.18)", width=8)  # drawn first and wide: the measured red line lies on it
    fig.add_trace(go.Scatter(x=d, y=d, mode="lines", name="y = d", line=band, hoverinfo="skip"), row=1, col=1)
    pairs = (
        ("var_scores", "var_scaled", 1),
        ("max_weight_scores", "max_weight_scaled", 2),
        ("entropy_scores", "entropy_scaled", 3),
    )
    for a, b, c in pairs:
        for name, key, colour in ((raw, a, RAW_COLOUR), (scaled, b, SCALED_COLOUR)):
            fig.add_trace(
                go.Scatter(
                    x=d,
                    y=col(key),
                    mode="lines+markers",
                    name=name,
                    legendgroup=name,
                    showlegend=c == 1,
                    line=dict(color=colour),
                    hovertemplate="d=%{x}: %{y:.3g}<extra>" + name + "</extra>",
                ),
                row=1,
                col=c,
            )
    fig.update_xaxes(
        type="log",
        title_text="d (size of q and k)",
        tickmode="array",
        tickvals=d,
        ticktext=[f"{int(v)}" for v in d],
        tickangle=30,  # as Plotly turned them in a third of the page: said here, so the margin is given (margins.room)
    )
    fig.update_yaxes(type="log", row=1, col=1, tickformat="~g")
    fig.update_yaxes(range=[0, 1.05], row=1, col=2)
    fig.update_yaxes(rangemode="tozero", row=1, col=3)
    if d_head:  # a marker line, drawn as a trace: shapes on log axes take log10 coordinates, easy to get wrong
        tops = (float(d.max()), 1.05, float(max(r.entropy_scaled for r in rows)) * 1.05)
        lows = (float(min(d.min(), 0.5)), 0.0, 0.0)
        for c in range(1, 4):
            fig.add_trace(
                go.Scatter(
                    x=[d_head, d_head],
                    y=[lows[c - 1], tops[c - 1]],
                    mode="lines",
                    line=dict(color=INK, width=1, dash="dash"),
                    name=f"this model: d = {d_head}",
                    legendgroup="model",
                    showlegend=c == 1,
                    hoverinfo="skip",
                ),
                row=1,
                col=c,
            )
    return finish(fig, "sqrt_d_law", 380, margin=dict(l=10, r=24, t=80, b=10))  # r: the last slanted label's end


def row_saturation_note(n_queries: int) -> str:
    """What the points of the row chart are for this many queries ('' when each point is one query)."""
    return group_note(n_queries, group_edges(n_queries), "queries", "mean (hover for its range)")
