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
from ..analysis.masks import FillRow, MaskReport
from ..analysis.scaling import ScalingComparison
from ..analysis.stats import normal_curve
from .common import DIFF_SCALE, SCORES_SCALE, WEIGHTS_SCALE, f32, symmetric_range, thin, tick_labels

RAW_COLOUR = "#d62728"  # softmax of raw scores: red, the "too hot" one
SCALED_COLOUR = "#1f77b4"
MASKED_BG = "#c8c8c8"  # masked cells are NaN and show the plot background: a flat grey no colour scale uses
FONT = dict(size=13)


def _finish(fig: go.Figure, name: str, height: int, top: int = 80, **layout) -> go.Figure:
    """Name, size and common styling; `top` leaves room for a legend above the subplot titles (less without one)."""
    fig.update_layout(
        meta={"figure": name},
        height=height,
        margin=dict(l=10, r=10, t=top, b=10),
        font=FONT,
        legend=dict(orientation="h", yanchor="bottom", y=1.1, xanchor="left", x=0),
        **layout,
    )
    return fig


def _token_axes(fig: go.Figure, tokens, row: int, col: int, show_y: bool = True, max_labels: int = 32) -> None:
    """Positional axes with '%03d token' labels (repeated tokens stay apart); query 0 at the top.

    Long sentences label every n-th position so the labels stay legible; hover still names every token.
    """
    labels = tick_labels(tokens)
    vals = list(range(0, len(labels), thin(len(labels), max_labels)))
    font = dict(size=11 if max_labels >= 32 else 10)
    ticks = dict(tickmode="array", tickvals=vals, ticktext=[labels[i] for i in vals], tickfont=font)
    ticks |= dict(showgrid=False, zeroline=False)  # a white zero line would cross row 0 of the grey masked cells
    fig.update_xaxes(ticks | dict(tickangle=-60, title_text="key"), row=row, col=col)
    fig.update_yaxes(
        ticks | dict(autorange="reversed", title_text="query" if show_y else None, showticklabels=show_y),
        row=row,
        col=col,
    )


def _grid_height(n_tokens: int, n_cols: int) -> int:
    """A height that makes cells roughly square at a typical page width, without the blank band that
    axis-locked squares leave when the page is narrower or wider than expected."""
    plot = np.clip(n_tokens * (18 if n_cols == 2 else 14), 260 if n_cols == 2 else 220, 420 if n_cols == 2 else 280)
    return int(plot) + (190 if n_cols == 2 else 160)


def _heatmap(z, tokens, coloraxis: str, what: str, name: str) -> go.Heatmap:
    """One [query, key] heatmap; hover names both tokens when the sentence is short enough to afford it."""
    T = len(tokens)
    kw = {}
    who = "query %{y} → key %{x}"
    if T <= 128:
        labels = np.array(tick_labels(tokens), dtype=object)
        kw["customdata"] = np.stack(np.broadcast_arrays(labels[:, None], labels[None, :]), axis=-1)
        who = "query %{customdata[0]} → key %{customdata[1]}"
    return go.Heatmap(
        z=f32(z),
        x=np.arange(T),
        y=np.arange(T),
        coloraxis=coloraxis,
        hoverongaps=False,
        name=name,
        hovertemplate=f"{who}<br>{what} %{{z:.3f}}<extra></extra>",
        **kw,
    )


def _colorbar(title: str, x: float = 1.0) -> dict:
    """A colour bar next to the top-aligned square heatmaps, not stretched over the tick labels below them."""
    return dict(title=title, x=x, y=1.0, yanchor="top", len=0.75, thickness=14)


def _weights_axis(x: float = 1.0, title: str = "weight") -> dict:
    return dict(colorscale=WEIGHTS_SCALE, cmin=0.0, cmax=1.0, colorbar=_colorbar(title, x))


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
                    line=dict(color="black", dash=dash, width=1.6),
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
            bgcolor="rgba(255,255,255,0.8)",
        )
    peak = max(int(cmp.hist_scores.counts.max(initial=1)), int(cmp.hist_scaled.counts.max(initial=1)))
    fig.update_yaxes(title_text="cells", row=1, col=1)
    fig.update_yaxes(range=[0, peak * 1.15])  # the theory curve can spike far above real data: keep the bars in view
    fig.update_xaxes(title_text="value")
    return _finish(fig, "score_histograms", 380, bargap=0)


def softmax_pair(cmp: ScalingComparison, tokens, head_label: str, scale_text: str) -> go.Figure:
    """softmax(scores) next to softmax(scores x scale), 0..1 on one colour scale: saturation shows as one bright cell
    per row."""
    titles = (f"softmax(scores): scale 1, {head_label}", f"softmax(scores × {scale_text}), {head_label}")
    fig = make_subplots(rows=1, cols=2, subplot_titles=titles, horizontal_spacing=0.1)
    fig.update_annotations(yshift=8)  # subplot titles clear of the plot frame
    for col, (w, name) in enumerate(
        ((cmp.raw.weights, "softmax raw"), (cmp.rescaled.weights, "softmax scaled")), start=1
    ):
        fig.add_trace(_heatmap(w.mean(axis=0), tokens, "coloraxis", "weight", name), row=1, col=col)
        _token_axes(fig, tokens, 1, col, show_y=col == 1)
    return _finish(fig, "softmax_pair", _grid_height(len(tokens), 2), top=50, coloraxis=_weights_axis())


def row_saturation(cmp: ScalingComparison, tokens, scale_text: str) -> go.Figure:
    """Per query row: the largest weight (1 = one-hot) and the entropy (0 = one-hot, log n = uniform), raw vs scaled.

    With several heads, each point is the mean over those heads."""
    labels = tick_labels(tokens)
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
            fig.add_trace(
                go.Scatter(
                    x=x,
                    y=f32(vals.mean(axis=0)),
                    mode="lines+markers",
                    name=name,
                    legendgroup=name,
                    showlegend=col == 1,
                    line=dict(color=colour),
                    customdata=labels,
                    hovertemplate="%{customdata}: %{y:.3f}<extra>" + name + "</extra>",
                ),
                row=1,
                col=col,
            )
    uniform = math.log(len(labels))
    fig.add_hline(
        y=uniform,
        line=dict(dash="dot", color="grey"),
        row=1,
        col=2,
        annotation_text=f"uniform = log {len(labels)}",
        annotation_position="top right",
    )
    fig.add_hline(
        y=1.0,
        line=dict(dash="dot", color="grey"),
        row=1,
        col=1,
        annotation_text="one-hot",
        annotation_position="top right",
    )
    fig.update_yaxes(range=[0, 1.12], row=1, col=1)
    fig.update_yaxes(range=[0, uniform * 1.12], row=1, col=2)
    step = thin(len(labels), 40)
    fig.update_xaxes(tickmode="array", tickvals=x[::step], ticktext=labels[::step], tickangle=-60, title_text="query")
    return _finish(fig, "row_saturation", 380)


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
        type="log", title_text="d (size of q and k)", tickmode="array", tickvals=d, ticktext=[f"{int(v)}" for v in d]
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
                    line=dict(color="black", width=1, dash="dash"),
                    name=f"this model: d = {d_head}",
                    legendgroup="model",
                    showlegend=c == 1,
                    hoverinfo="skip",
                ),
                row=1,
                col=c,
            )
    return _finish(fig, "sqrt_d_law", 380)


# --- Masks page --------------------------------------------------------------------------------------------


def stage_pair(scaled: np.ndarray, mask: np.ndarray, tokens, head_label: str) -> go.Figure:
    """The scaled stage before the mask and the masked stage after it; masked cells are NaN, shown as flat grey."""
    masked = np.where(mask, scaled, np.nan)
    r = symmetric_range(scaled)
    titles = (f"<b>scaled</b> (before the mask), {head_label}", f"<b>masked</b> (after; grey = removed), {head_label}")
    fig = make_subplots(rows=1, cols=2, subplot_titles=titles, horizontal_spacing=0.1)
    fig.update_annotations(yshift=8)  # subplot titles clear of the plot frame
    for col, (z, name) in enumerate(((scaled, "scaled"), (masked, "masked")), start=1):
        fig.add_trace(_heatmap(z, tokens, "coloraxis", name, name), row=1, col=col)
        _token_axes(fig, tokens, 1, col, show_y=col == 1)
    fig.update_xaxes(showgrid=False)
    side = _grid_height(len(tokens), 2)
    axis = dict(colorscale=SCORES_SCALE, cmin=-r, cmax=r, cmid=0, colorbar=_colorbar("value"))
    return _finish(fig, "mask_stages", side, top=50, coloraxis=axis, plot_bgcolor=MASKED_BG)


def weights_comparison(
    without: np.ndarray, with_mask: np.ndarray, tokens, head_label: str, own_causal: bool = False
) -> go.Figure:
    """weights without the mask, with it, and their difference (diverging scale centred on 0: where weight moved).

    own_causal: the model's own causal mask stays in the left panel (a causal model never sees the future), and
    its title says so instead of claiming every key is visible."""
    diff = np.asarray(with_mask, np.float32) - np.asarray(without, np.float32)
    r = max(symmetric_range(diff), 1e-3)  # all-zero difference: a white map, not a scale in micro-units
    left = "<b>weights</b>, model's own causal mask only" if own_causal else "<b>weights</b>, every key visible"
    titles = (left, "<b>weights</b> with your masks", "difference (yours − without)")
    fig = make_subplots(rows=1, cols=3, subplot_titles=titles, horizontal_spacing=0.06)
    fig.update_annotations(yshift=8)  # subplot titles clear of the plot frame
    for col, (z, axis, what, name) in enumerate(
        (
            (without, "coloraxis", "weight", "without"),
            (with_mask, "coloraxis", "weight", "with"),
            (diff, "coloraxis2", "change", "difference"),
        ),
        start=1,
    ):
        fig.add_trace(_heatmap(z, tokens, axis, what, name), row=1, col=col)
        _token_axes(fig, tokens, 1, col, show_y=col == 1, max_labels=16)
    diff_axis = dict(colorscale=DIFF_SCALE, cmin=-r, cmax=r, cmid=0, colorbar=_colorbar("change", 1.09))
    side = _grid_height(len(tokens), 3)
    return _finish(
        fig,
        "mask_weights",
        side,
        top=50,
        coloraxis=_weights_axis(x=1.0),
        coloraxis2=diff_axis,
    )


def leak_bars(report: MaskReport, applied: tuple[int, ...] | None, own_causal: bool = False) -> go.Figure:
    """Per layer: attention that reached positions that should be invisible (every key visible vs your masks),
    and the largest change in weights: a forward-pass experiment reaches every layer after the first masked one."""
    layers = np.arange(report.leak_with.size)
    names = [f"layer {i}" + (" (mask)" if applied is None or i in applied else "") for i in layers]
    fig = make_subplots(
        rows=1,
        cols=2,
        horizontal_spacing=0.1,
        subplot_titles=(
            "attention on positions that should be invisible",
            "largest change in weights (your masks vs every key visible)",
        ),
    )
    for vals, name, colour in (
        (report.leak_without, "without your masks" if own_causal else "every key visible", RAW_COLOUR),
        (report.leak_with, "with your masks", SCALED_COLOUR),
    ):
        fig.add_trace(
            go.Bar(
                x=names,
                y=f32(vals),
                name=name,
                marker_color=colour,
                texttemplate="%{y:.1%}",
                textposition="outside",
                textfont=dict(size=11),
                hovertemplate="%{x}: %{y:.2%} of attention<extra>" + name + "</extra>",
            ),
            row=1,
            col=1,
        )
    colours = ["#555" if applied is None or i in applied else "#aaa" for i in layers]
    fig.add_trace(
        go.Bar(
            x=names,
            y=f32(report.change),
            marker_color=colours,
            name="max |Δ weight|",
            showlegend=False,
            texttemplate="%{y:.2f}",
            textposition="outside",
            textfont=dict(size=11),
            hovertemplate="%{x}: max change %{y:.3f}<extra></extra>",
        ),
        row=1,
        col=2,
    )
    top = max(float(report.leak_without.max(initial=0)), float(report.leak_with.max(initial=0)), 0.01)
    # ".0%" rounds the ticks of a 0..1% axis to "0%, 0%, 1%, 1%": "~%" keeps the digits a tick needs
    fig.update_yaxes(tickformat=".2~%", range=[0, top * 1.25], row=1, col=1)
    fig.update_yaxes(range=[0, max(float(report.change.max(initial=0)), 0.01) * 1.25], row=1, col=2)
    return _finish(fig, "mask_leak", 340, barmode="group", bargap=0.25 if layers.size > 2 else 0.7)


def fill_demo_figure(rows: list[FillRow], tokens, chosen: str | None = None) -> go.Figure:
    """For each fill value, softmax on a row with every key masked and on a row with some keys masked.

    A finite fill turns a fully masked row into a uniform one (1/n each); -inf turns it into zeros."""
    labels = tick_labels(tokens)
    ylabels, z = [], []
    for r in rows:
        mark = " ◀ chosen" if r.fill == chosen else ""
        name = "float32 min" if r.fill == "min" else r.fill
        ylabels += [f"fill {name}: every key masked{mark}", f"fill {name}: some keys masked"]
        z += [r.every_masked, r.some_masked]
    z = np.asarray(z, np.float32)
    text = np.vectorize(lambda v: "0" if v == 0 else f"{v:.2f}")(z)
    fig = go.Figure(
        go.Heatmap(
            z=z,
            x=np.arange(len(labels)),
            y=np.arange(len(ylabels)),
            coloraxis="coloraxis",
            text=text,
            texttemplate="%{text}" if len(labels) <= 24 else None,
            hovertemplate="key %{x}: weight %{z:.4f}<extra></extra>",
            xgap=1,
            ygap=1,
        )
    )
    step = thin(len(labels), 40)
    fig.update_xaxes(
        tickmode="array",
        tickvals=list(range(0, len(labels), step)),
        ticktext=labels[::step],
        tickangle=-60,
        title_text="key",
    )
    fig.update_yaxes(tickmode="array", tickvals=list(range(len(ylabels))), ticktext=ylabels, autorange="reversed")
    fig.update_xaxes(showgrid=False, zeroline=False)
    fig.update_yaxes(showgrid=False, zeroline=False)
    return _finish(fig, "fill_demo", 150 + 34 * len(ylabels), top=30, coloraxis=_weights_axis())
