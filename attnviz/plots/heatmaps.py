"""Attention heatmaps: every head of a layer, one head up close, and every layer x head at a glance.

Builds plotly Figures from an AttentionTrace; never calls streamlit, so every figure is unit-testable.

Conventions (see plots/__init__.py): rows are queries, columns are keys, axes are positional with
"%03d token" tick labels, tokens are escaped, colour scales are explicit (weights 0..1 sequential;
scores, scaled and masked diverging and centred on 0), masked cells are NaN gaps, arrays are float32.

Payload: a float32 heatmap of T x T tokens costs about 5.5 * T^2 bytes of JSON, so a 12-head grid of a
512-token text is ~17 MB. The grid and the single head therefore show at most MAX_SHOWN tokens per axis: pass
`token_range=(start, stop)` (queries and keys alike) or a `Window` (queries and keys chosen apart, so late queries
can keep the first keys in view); without it the first MAX_SHOWN tokens are shown and the title says so. The
overview pools long texts into small tiles instead.
"""

from __future__ import annotations

import math

import numpy as np
import plotly.graph_objects as go

from ..analysis.pooling import pooled_stage
from ..analysis.sinks import window_without_keys
from ..analysis.values import VALUE_WEIGHTED, value_share
from ..errors import AttnvizError
from ..trace import AttentionTrace, window_cache
from .clickable import CELLS, cell_targets, target_axes  # noqa: F401 (CELLS re-exported)
from .colours import COLOUR_RANGES, LOG_FLOOR, colour, colour_bar, colour_values, transformed  # noqa: F401
from .common import MASKED_BG, MAX_TICKS, PAPER, escape, f32, finish, thin, tick_labels, ticks, token_axis
from .generation import add_spans
from .pairs import add_boundary
from .panels import panel_axes, panel_layout
from .value_weighted import PROBABILITIES, VALUE_WEIGHTED_CAPTION, VALUE_WEIGHTED_NOTE, drawable  # noqa: F401
from .windows import MAX_SHOWN, Window, axis_ranges, range_note, window, windows  # noqa: F401 (re-exported)

TILE = 24  # the overview pools every head to at most TILE x TILE cells
#: How to read one head's heatmap (head_detail), said beside it on the Heads page and on a cold start's preview
READING = (
    "**How to read it.** Each **row** is a query: the token that is looking. Each **column** is a key: "
    "the token being looked at. A bright cell means the row's token takes a lot from the column's token."
)
GRID_HEADS = (
    32  # panels one head grid draws at most (each is two axes and a heatmap: the browser's cost grows with them)
)
OVERVIEW_CELLS = 600_000  # cells of the overview's image at most: tiles shrink for many layers x heads
PER_TILE = 16  # query rows the overview reads per row of tiles (every key of them): time grows with the keys only
#: The Heads figures' text: 12 px, not finish's 13, as they were sized for it (the single head's slanted key labels,
#: up to 20 of them, ran into each other at 13 px on a sentence pair's 19 tokens).
FONT_12 = dict(size=12)

#: One name per stage, used in titles, colour bars and the page that explains them.
STAGE_LABELS = {
    "scores": "scores (q·k)",
    "scaled": "scaled",
    "masked": "masked",
    "weights": "weights",
    VALUE_WEIGHTED: "value-weighted",
}

# --- small pure helpers -----------------------------------------------------------------------------


def stage_values(
    trace: AttentionTrace, layer: int, stage: str, queries=None, keys=None, without=(), heads=None
) -> np.ndarray:
    """[head, query, key] float32 values of one stage, with masked cells as NaN for the masked stage.

    queries / keys: (start, stop) windows; only the window's rows are computed (every key still in the softmax),
    so a long text never builds a layer's full [head, query, key] stages for a 128-token view. `without`: sink keys
    whose weight is removed, each row renormalised over its other keys (weights only, `sinks.window_without_keys`)."""
    rows, cols = queries or (0, trace.n_tokens), keys or (0, trace.n_keys)
    if stage == VALUE_WEIGHTED:  # a window's rows: never a long text's whole layer (and nothing kept per window)
        return np.array(value_share(trace, layer, queries=rows, keys=cols))
    if not trace.has(stage):
        raise AttnvizError(trace.why_not(stage))
    if without and stage == "weights":
        return window_without_keys(trace, layer, rows, cols, without)
    z = np.array(getattr(window_cache.stages(trace, layer, heads, rows, cols), stage), dtype=np.float32)
    if stage == "masked":
        z[:, ~trace.layer_mask(layer, rows, cols)] = np.nan  # only the window's cells of the mask
    return z


def _where(trace: AttentionTrace, layer: int) -> str:
    """'Layer 3', or 'Our module' for our single-layer module (its layer 0 is not the model's layer 0)."""
    return trace.provenance.layer_label(layer).capitalize()


def _without(stage: str, without) -> str:
    """The title's note for weights drawn without their sink keys."""
    if not without or stage != "weights":
        return ""
    return f" without key{'s' if len(without) > 1 else ''} {', '.join(map(str, without))} (rows renormalised)"


def stage_note(trace: AttentionTrace, layer: int, stage: str) -> str:
    """A sentence for what a stage looks like here, when the picture alone would puzzle a reader."""
    if stage == VALUE_WEIGHTED:
        return VALUE_WEIGHTED_CAPTION
    if stage == "weights" and trace.n_tokens <= MAX_SHOWN:  # near-uniform rows: a short text's puzzle
        w = window_cache.stages(trace, layer).weights
        if trace.n_keys > 2 and float(w.max()) < min(0.3, 2.5 / trace.n_keys):
            return (
                f"Attention is nearly uniform here: every weight lies between {float(w.min()):.3f} and "
                f"{float(w.max()):.3f}, close to 1/{trace.n_keys} = {1 / trace.n_keys:.3f} "
                "(what random weights give). Hover for exact values"
                + (", or look at the scores stage." if trace.has("scores") else ".")
            )
    mask = trace.layer_mask(layer)
    if mask is None or stage not in ("masked", "weights"):
        return ""
    blocked = int((~mask).sum())
    if blocked == 0:
        return (
            "Nothing is masked for this text at this layer (no padding, not causal), so masked equals scaled."
            if stage == "masked"
            else ""
        )
    n = trace.n_tokens * trace.n_keys
    return f"{blocked:,} of {n:,} query-key pairs are masked at this layer" + (
        ": they are the gaps." if stage == "masked" else ": their weight is exactly 0."
    )


def _grid_hover(z: np.ndarray, true_values: bool, head: str) -> dict:
    """hovertemplate (and customdata) for one grid panel; with transformed colours the hover reads the true value.

    The axes are categories named by the tokens' labels, so %{x} and %{y} name the tokens at any length without
    a per-cell payload."""
    who = f"{head}<br>query %{{y}}<br>key %{{x}}"
    if not true_values:
        return dict(hovertemplate=f"{who}<br>%{{z:.4g}}<extra></extra>")
    return dict(customdata=f32(z), hovertemplate=f"{who}<br>%{{customdata:.4g}}<extra></extra>")


def grid_heads(n_head: int, first: int = 0) -> tuple[int, int]:
    """(first, stop) of the heads a grid draws: at most GRID_HEADS, from `first` (moved back to fit)."""
    first = max(0, min(int(first), n_head - GRID_HEADS))
    return first, min(n_head, first + GRID_HEADS)


def head_grid(
    trace: AttentionTrace,
    layer: int,
    stage: str = "weights",
    cols: int = 4,
    token_range=None,
    colours: str = "linear",
    boundary: int | None = None,
    titles=None,
    without=(),
    first_head: int = 0,
) -> go.Figure:
    """Every head of one layer side by side on ONE colour scale, so heads can be compared at a glance.

    `colours`: a COLOUR_RANGES id for weights; the hover then still shows the true weight. `boundary`: where
    sentence B of a pair starts (dashed lines on every panel, see plots.pairs), or None. `titles`: one per head
    (e.g. its key/value group); `without`: sink keys left out of the weights, rows renormalised (see stage_values).
    At most GRID_HEADS heads are drawn, from `first_head` (`grid_heads`); the title then says which."""
    (start, stop), (kstart, kstop) = windows(trace, token_range)
    h0, h1 = grid_heads(trace.n_head, first_head)
    picked = None if (h0, h1) == (0, trace.n_head) else list(range(h0, h1))  # only the drawn heads' stages
    z_all = stage_values(trace, layer, stage, (start, stop), (kstart, kstop), without, picked)
    z_all = z_all[h0:h1] if z_all.shape[0] == trace.n_head else z_all
    n_head = z_all.shape[0]
    titles = list(titles or [f"head {h}" for h in range(trace.n_head)])[h0:h1]
    cols = max(1, min(cols, n_head))
    rows = math.ceil(n_head / cols)
    hspace, vspace = 0.02 if cols > 1 else 0.0, min(0.06, 0.3 / rows) if rows > 1 else 0.0
    layout = panel_layout(rows, cols, titles, hspace, vspace)
    scale = colour(stage, z_all, mode=colours)
    label = STAGE_LABELS[stage]
    keys, queries = tick_labels(trace.key_tokens)[kstart:kstop], tick_labels(trace.tokens)[start:stop]
    data = [
        dict(
            type="heatmap",
            z=f32(colour_values(stage, z_all[h], colours)),
            x=keys,
            y=queries,
            **_grid_hover(z_all[h], transformed(stage, colours), f"head {h0 + h} · {label}"),
            hoverongaps=False,
            showscale=h == 0,
            colorbar=colour_bar(stage, colours, label),
            **scale,
            **panel_axes(h),
        )
        for h in range(n_head)
    ]
    # Fixed margins and no key labels under the panels: with 2 x n_head axes, Plotly's automatic margin
    # passes and tick-label layout were most of the browser's redraw time (measured in Chromium).
    # The keys are named in the hover and on the large single-head view below.
    x_axis = token_axis(trace.key_tokens, kstart, kstop, MAX_TICKS // 2) | dict(
        showticklabels=False, automargin=False, showgrid=False, range=[kstart - 0.5, kstop - 0.5]
    )
    panel = max(160, min(320, 860 // cols))  # about square in a ~1000 px wide main column
    # a 9 px label needs ~13 px of its panel's height: 20 labels in a 215 px panel (a sentence pair) overlapped
    y_axis = token_axis(trace.tokens, start, stop, min(MAX_TICKS // 2, (panel - 20) // 13)) | dict(
        tickfont=dict(size=9), automargin=False, showgrid=False, range=[stop - 0.5, start - 0.5]
    )
    for name in [k for k in layout if k.startswith(("xaxis", "yaxis"))]:
        layout[name] |= x_axis if name.startswith("x") else y_axis  # every panel's axes, as update_xaxes did
    for title in layout["annotations"]:
        title["font"] = dict(size=12)
    note = range_note(trace.n_tokens, trace.n_keys, (start, stop), (kstart, kstop))
    if n_head < trace.n_head:
        note += f" · heads {h0}–{h1 - 1} of {trace.n_head}"
    title = f"{_where(trace, layer)} · {label}{_without(stage, without)}{note}{_subtitle(stage)}"
    fig = finish(
        dict(data=data, layout=layout),  # as dicts: not validated (see finish)
        "head_grid",
        rows * panel + 100,
        top=80 if stage == VALUE_WEIGHTED else 60,
        meta={"layer": layer, "stage": stage, "heads": [h0, h1]},
        font=FONT_12,
        plot_bgcolor=MASKED_BG if stage == "masked" else PAPER,  # masked cells: grey gaps
        title=dict(text=title, font=dict(size=14), x=0, xanchor="left"),
    )
    drawn = ((start, stop), (kstart, kstop))
    return add_spans(add_boundary(fig, boundary, drawn, n_head), trace, drawn, n_head)  # spans: a generation's parts


def _subtitle(stage: str, note: str = "") -> str:
    """A second title line: what value-weighted attention is, or `note`."""
    text = VALUE_WEIGHTED_NOTE if stage == VALUE_WEIGHTED else note
    return f"<br><sup>{escape(text)}</sup>" if text else ""


def head_detail(
    trace: AttentionTrace,
    layer: int,
    head: int,
    stage: str = "weights",
    token_range=None,
    colours: str = "linear",
    boundary: int | None = None,
    without=(),
) -> go.Figure:
    """One head large, with every stage in the hover (query, key, weights, scores, scaled); `colours`, `boundary`
    and `without` as in head_grid (the hover's weights are then the renormalised ones drawn)."""
    (start, stop), (kstart, kstop) = windows(trace, token_range)
    z_layer = stage_values(trace, layer, stage, (start, stop), (kstart, kstop), without)
    z = z_layer[head]
    stages = window_cache.stages(trace, layer, queries=(start, stop), keys=(kstart, kstop))
    sl = (head, slice(None), slice(None))
    values = {"weights": z if without and stage == "weights" else stages.weights[sl]}  # numbers, not strings
    note = ""
    if trace.has("scores"):
        values |= {"scores": stages.scores[sl], "scaled": stages.scaled[sl]}
    else:
        note = "Raw and scaled scores are unavailable: this model only gives its final weights."
    if stage == VALUE_WEIGHTED:
        values[STAGE_LABELS[stage]] = z
    label = STAGE_LABELS[stage]
    image = dict(
        type="heatmap",
        z=f32(colour_values(stage, z, colours)),
        x0=kstart,
        dx=1,
        y0=start,
        dy=1,
        hoverinfo="skip",  # the click targets on top carry the hover (see plots.clickable)
        hoverongaps=False,
        colorbar=colour_bar(stage, colours, label),
        **colour(stage, z_layer, mode=colours),  # the layer's range, so colours mean what they mean in the grid
    )
    n = max(stop - start, kstop - kstart)
    side = max(460, min(820, 24 * n + 260))  # about square in a two-thirds-width column
    cell_px = (side - 160) / n  # about a cell: the plot is the figure less its title and tick labels
    drawn = ((start, stop), (kstart, kstop))
    targets = cell_targets(*drawn, cell_px, values)  # hover and clicks (plots.clickable), on hidden axes of their own
    names = (tick_labels(trace.tokens)[start:stop], tick_labels(trace.key_tokens)[kstart:kstop])
    layout = dict(  # the keys get half the queries' labels: the plot is narrower than tall, slanted labels ~17 px
        xaxis=ticks(trace.key_tokens, kstart, kstop, MAX_TICKS // 2)
        | dict(tickangle=-60, title=dict(text="key (attended to)"), showgrid=False, range=[kstart - 0.5, kstop - 0.5]),
        yaxis=ticks(trace.tokens, start, stop)
        | dict(title=dict(text="query (attending)"), showgrid=False, range=[stop - 0.5, start - 0.5]),
        hoverdistance=-1,  # hover and click: the nearest cell
        **target_axes(*drawn, *names),
    )
    part = range_note(trace.n_tokens, trace.n_keys, (start, stop), (kstart, kstop))
    title = f"{_where(trace, layer)} · head {head} · {label}{_without(stage, without)}{part}"
    fig = finish(
        dict(data=[image, targets.to_plotly_json()], layout=layout),  # as dicts: not validated; clicks on top
        "head_detail",
        side,
        top=50 if note or stage == VALUE_WEIGHTED else 40,
        meta={"layer": layer, "head": head, "stage": stage},
        font=FONT_12,
        plot_bgcolor=MASKED_BG if stage == "masked" else PAPER,  # masked cells: grey gaps
        title=dict(text=title + _subtitle(stage, note), font=dict(size=14), x=0, xanchor="left"),
    )
    return add_spans(add_boundary(fig, boundary, drawn), trace, drawn)


def overview(
    trace: AttentionTrace, stage: str = "weights", selected=None, tile: int = TILE, colours: str = "linear"
) -> go.Figure:
    """Every layer x head as one tiled image (fast to draw), plus one invisible clickable marker per tile.

    Texts longer than `tile` tokens are pooled to tile x tile blocks per head (`analysis.pooling`); score stages use a
    robust colour range (see `colour`), weights the `colours` range (per tile). The markers carry
    customdata [layer, head], which the dashboard reads back from a click. `selected` outlines the tile on show.
    """
    n_layer, n_head = trace.n_layer, trace.n_head
    # pooled one layer at a time, so a long text never holds every layer at full size
    tile = max(2, min(tile, math.isqrt(OVERVIEW_CELLS // (n_layer * n_head)) - 1))  # many layers x heads: smaller tiles
    read = lambda: pooled_stage(trace, stage, tile, per_tile=PER_TILE)  # noqa: E731 - a few query rows per tile row
    pooled = window_cache.memo(trace, ("overview", stage, tile), read)  # once
    pooled = colour_values(stage, pooled, colours)  # the colours drawn (the overview has no value hover)
    sq, sk = pooled.shape[-2:]  # tile height (queries) and width (keys): they differ in cross-attention
    ystep, xstep = sq + 1, sk + 1  # one empty (NaN) row and column between tiles
    image = np.full((n_layer * ystep - 1, n_head * xstep - 1), np.nan, dtype=np.float32)
    for layer in range(n_layer):
        for h in range(n_head):
            image[layer * ystep : layer * ystep + sq, h * xstep : h * xstep + sk] = pooled[layer, h]
    ycentre, xcentre = (sq - 1) / 2, (sk - 1) / 2
    lay, hd = np.meshgrid(np.arange(n_layer), np.arange(n_head), indexing="ij")
    image_trace = dict(
        type="heatmap",
        z=image,
        hoverinfo="skip",
        colorbar=colour_bar(stage, colours, STAGE_LABELS[stage]) | dict(thickness=12),
        **colour(stage, pooled, robust=True, mode=colours),
    )
    row_px = int(max(28, min(120, 860 / n_head, 900 / n_layer)))  # tiles about square, figure at most ~1000 px
    marker = int(max(6, min(row_px, 900 / n_head) * 0.8))
    tiles = dict(
        type="scatter",
        x=(hd.ravel() * xstep + xcentre).astype(np.float32),
        y=(lay.ravel() * ystep + ycentre).astype(np.float32),
        customdata=[[int(a), int(b)] for a, b in zip(lay.ravel(), hd.ravel())],  # plain lists: see selected_tile
        mode="markers",
        marker=dict(symbol="square", size=marker, color="rgba(0,0,0,0)"),
        hoverinfo="none",
        showlegend=False,
        name="tiles",
    )
    axis = dict(showgrid=False, zeroline=False, fixedrange=True, tickmode="array")
    hstep, lstep = thin(n_head, 32), thin(n_layer, 32)
    layout = dict(
        xaxis=axis
        | dict(
            tickvals=[h * xstep + xcentre for h in range(0, n_head, hstep)],
            ticktext=[str(h) for h in range(0, n_head, hstep)],
            title=dict(text="head"),
            side="top",
            range=[-0.5, n_head * xstep - 1.5],
        ),
        yaxis=axis
        | dict(
            tickvals=[layer * ystep + ycentre for layer in range(0, n_layer, lstep)],
            ticktext=[str(layer) for layer in range(0, n_layer, lstep)],
            title=dict(text="layer"),
            range=[n_layer * ystep - 1.5, -0.5],
        ),
    )
    if selected is not None and 0 <= selected[0] < n_layer and 0 <= selected[1] < n_head:
        y0, x0 = selected[0] * ystep - 0.5, selected[1] * xstep - 0.5
        rect = dict(type="rect", x0=x0, x1=x0 + sk, y0=y0, y1=y0 + sq, line=dict(color="#ff4b4b", width=3))
        layout["shapes"] = [rect]
    shrunk = sq < trace.n_tokens or sk < trace.n_keys
    pooled_note = f" · each head pooled to {sq}×{sk} blocks of tokens" if shrunk else ""
    if trace.n_tokens > sq * PER_TILE:  # a long text: each row of tiles averages a centred run of its queries
        pooled_note += f" (each from {PER_TILE} of its ~{trace.n_tokens // sq} queries)"
    return finish(
        dict(data=[image_trace, tiles], layout=layout),  # as dicts: not validated (see finish)
        "overview",
        n_layer * row_px + 110,
        top=100,
        meta={"stage": stage},
        font=FONT_12,
        hovermode="closest",
        clickmode="event+select",
        title=dict(
            text=f"All layers × heads · {STAGE_LABELS[stage]}{pooled_note}",
            font=dict(size=14),
            x=0,
            xanchor="left",
            y=1,
            yanchor="top",
            yref="container",
            pad=dict(t=8),
        ),
    )
