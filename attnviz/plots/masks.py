"""Figures for the Masks page: the stages around the mask, where the weight went, leaks, fully masked rows.

Input is what `attnviz.analysis.masks` computed; output is a plotly Figure. Never calls streamlit.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..analysis.masks import FillRow, MaskReport
from .common import (
    DIFF_SCALE,
    MASKED_BG,
    SCORES_SCALE,
    colorbar,
    f32,
    finish,
    grid_height,
    group,
    group_edges,
    group_labels,
    group_note,
    heatmap,
    symmetric_range,
    ticks,
    token_axes_layout,
    weights_axis,
)
from .distributions import RAW_COLOUR, SCALED_COLOUR
from .pairs import add_boundary
from .panels import panel_axes, panel_axis_dicts, row_layout

# --- Masks page --------------------------------------------------------------------------------------------


def stage_pair(
    scaled: np.ndarray, mask: np.ndarray, tokens, head_label: str, boundary=None, start: int = 0, key_tokens=None
) -> go.Figure:
    """The scaled stage before the mask and the masked stage after it; masked cells are NaN, shown as flat grey.

    `scaled` and `mask` may be a window of the text, positions start.. (long texts). `boundary`: where sentence B
    of a pair starts (dashed lines on both panels), or None. key_tokens: cross-attention's keys (see heatmap)."""
    masked = np.where(mask, scaled, np.nan)
    r = symmetric_range(scaled)
    # two lines each: side by side, one-line titles with a long text's window ran into each other
    titles = (
        f"<b>scaled</b>, before the mask<br>{head_label}",
        f"<b>masked</b>, after (grey = removed)<br>{head_label}",
    )
    layout, data = _row_of_panels(titles, 0.1), []
    stop = start + len(scaled)
    for i, (z, name) in enumerate(((scaled, "scaled"), (masked, "masked"))):
        data.append(heatmap(z, tokens, "coloraxis", name, name, start=start, key_tokens=key_tokens).to_plotly_json())
        data[-1] |= panel_axes(i)
        x, y = panel_axis_dicts(layout, i)
        tx, ty = token_axes_layout(tokens, show_y=i == 0, start=start, stop=stop, key_tokens=key_tokens)
        x |= tx | dict(showgrid=False)
        y |= ty
    side = grid_height(stop - start, 2)
    axis = dict(colorscale=SCORES_SCALE, cmin=-r, cmax=r, cmid=0, colorbar=colorbar("value"))
    fig = finish(dict(data=data, layout=layout), "mask_stages", side, top=70, coloraxis=axis, plot_bgcolor=MASKED_BG)
    return add_boundary(fig, boundary, (start, stop), 2)


def weights_comparison(
    without: np.ndarray,
    with_mask: np.ndarray,
    tokens,
    head_label: str,
    own_causal: bool = False,
    start: int = 0,
    boundary=None,
    key_tokens=None,
) -> go.Figure:
    """weights without the mask, with it, and their difference (diverging scale centred on 0: where weight moved).

    The arrays may be a window of the text, positions start.. (long texts).

    own_causal: the model's own causal mask stays in the left panel (a causal model never sees the future), and
    its title says so instead of claiming every key is visible. `boundary` and key_tokens as in stage_pair."""
    diff = np.asarray(with_mask, np.float32) - np.asarray(without, np.float32)
    r = max(symmetric_range(diff), 1e-3)  # all-zero difference: a white map, not a scale in micro-units
    # two short lines each: three titles side by side share a third of the width (they ran into each other)
    left = (
        "<b>weights</b> without your masks<br>(the model's own causal mask)"
        if own_causal
        else "<b>weights</b><br>every key visible"
    )
    titles = (left, "<b>weights</b><br>with your masks", "<b>difference</b><br>yours − without")
    layout, data = _row_of_panels(titles, 0.06), []
    for i, (z, axis, what, name) in enumerate(
        (
            (without, "coloraxis", "weight", "without"),
            (with_mask, "coloraxis", "weight", "with"),
            (diff, "coloraxis2", "change", "difference"),
        )
    ):
        data.append(heatmap(z, tokens, axis, what, name, start=start, key_tokens=key_tokens).to_plotly_json())
        data[-1] |= panel_axes(i)
        x, y = panel_axis_dicts(layout, i)
        tx, ty = token_axes_layout(tokens, i == 0, 16, start, start + len(z), key_tokens)
        x |= tx
        y |= ty
    diff_axis = dict(colorscale=DIFF_SCALE, cmin=-r, cmax=r, cmid=0, colorbar=colorbar("change", 1.09))
    side = grid_height(len(diff), 3)
    fig = finish(
        dict(data=data, layout=layout),
        "mask_weights",
        side,
        top=70,
        coloraxis=weights_axis(x=1.0),
        coloraxis2=diff_axis,
    )
    return add_boundary(fig, boundary, (start, start + len(diff)), 3)


def _row_of_panels(titles, spacing: float) -> dict:
    """One row of panels (plots.panels.row_layout), its titles clear of the plot frame."""
    layout = row_layout(titles, spacing)
    for title in layout["annotations"]:
        title["yshift"] = 8
    return layout


def leak_bars(report: MaskReport, applied: tuple[int, ...] | None, own_causal: bool = False) -> go.Figure:
    """Per layer: attention that reached positions that should be invisible (every key visible vs your masks),
    and the largest change in weights against the model's own trace: a forward-pass experiment reaches every layer
    after the first masked one. Each layer's label says whose mask it ran with: yours (`applied`, None = every
    layer) or the model's own, which a layer outside the experiment keeps: a star marks yours, the axis title says so
    (labels this short stay horizontal)."""
    layers = np.arange(report.leak_with.size)
    # numbers, not "layer 10*": a 24-layer model's labels would overlap in half the width
    names = [f"{i}" + ("*" if applied is not None and i in applied else "") for i in layers]
    whose = "layer (every one with your masks)" if applied is None else "layer (* your masks; others the model's own)"
    fig = make_subplots(
        rows=1,
        cols=2,
        horizontal_spacing=0.1,
        subplot_titles=(
            "attention on positions that should be invisible",
            "largest change vs the model's own weights",  # longer titles are clipped at 1,280 px
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
                texttemplate="%{y:.1%}" if layers.size <= 4 else None,  # more: values would touch; hover has them
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
            texttemplate="%{y:.2~r}" if layers.size <= 8 else None,  # 2 significant digits: 0.004 is not "0.00"
            textposition="outside",
            textfont=dict(size=11),
            hovertemplate="%{x}: max change %{y:.3f} against the model's own weights<extra></extra>",
        ),
        row=1,
        col=2,
    )
    top = max(float(report.leak_without.max(initial=0)), float(report.leak_with.max(initial=0)), 0.01)
    # ".0%" rounds the ticks of a 0..1% axis to "0%, 0%, 1%, 1%": "~%" keeps the digits a tick needs
    fig.update_yaxes(tickformat=".2~%", range=[0, top * 1.25], row=1, col=1)
    fig.update_yaxes(range=[0, max(float(report.change.max(initial=0)), 0.01) * 1.25], row=1, col=2)
    fig.update_xaxes(title_text=whose, title_font_size=12)
    fig.update_xaxes(type="category", tickangle=0)
    return finish(
        fig,
        "mask_leak",
        340,
        barmode="group",
        bargap=0.25 if layers.size > 2 else 0.5,  # 0.7 left two layers' bars 25 px wide: their values overlapped
        uniformtext=dict(minsize=8, mode="hide"),
    )  # values too wide for their bar are left to the hover


def fill_demo_figure(rows: list[FillRow], tokens, chosen: str | None = None) -> go.Figure:
    """For each fill value, softmax on a row with every key masked and on a row with some keys masked.

    A finite fill turns a fully masked row into a uniform one (1/n each); -inf turns it into zeros.
    More than LONG_CHART keys are summed in groups of consecutive keys (`fill_demo_note` says so)."""
    edges = group_edges(len(tokens))
    labels = group_labels(tokens, edges)
    ylabels, z = [], []
    for r in rows:
        mark = " ◀ chosen" if r.fill == chosen else ""
        name = "float32 min" if r.fill == "min" else r.fill
        ylabels += [f"fill {name}: every key masked{mark}", f"fill {name}: some keys masked"]
        z += [r.every_masked, r.some_masked]
    z = group(np.asarray(z, np.float32), edges, "sum").astype(np.float32)
    text = np.vectorize(lambda v: "0" if v == 0 else f"{v:.2f}")(z)
    fig = go.Figure(
        go.Heatmap(
            z=z,
            x=np.arange(len(labels)),
            y=np.arange(len(ylabels)),
            coloraxis="coloraxis",
            text=text,
            texttemplate="%{text}" if len(labels) <= 24 else None,
            customdata=np.broadcast_to(np.array(labels, dtype=object), z.shape),
            hovertemplate="key %{customdata}: weight %{z:.4f}<extra></extra>",
            xgap=1,
            ygap=1,
        )
    )
    fig.update_xaxes(
        **ticks(labels=labels, most=20),
        tickangle=-60,  # the row names leave the plot ~500 px
        title_text="key",
    )
    fig.update_yaxes(**ticks(labels=ylabels, most=len(ylabels)), autorange="reversed")
    return finish(fig, "fill_demo", 150 + 34 * len(ylabels), top=30, coloraxis=weights_axis())


def fill_demo_note(n_keys: int) -> str:
    """What the fill chart's columns are for this many keys ('' when each column is one key)."""
    return group_note(n_keys, group_edges(n_keys), "keys", "total weight", item="cell")
