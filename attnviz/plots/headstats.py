"""Figures of the Head statistics and Rollout pages: a layer x head grid of one number, a weights matrix."""

from __future__ import annotations

import textwrap

import numpy as np
import plotly.graph_objects as go

from .common import MAX_TICKS, WEIGHTS_SCALE, escape, f32, finish, readable_tokens, ticks
from .pairs import add_boundary
from .value_weighted import note_lines
from .windows import axis_ranges, range_note, window

HALF_WIDTH_TICKS = 12  # key labels of a half-width matrix (~200 px): upright, ~16 px apart, they never touch
HALF_WIDTH_TITLE = 44  # characters of a title line on a half-width matrix (Plotly never wraps a title)
STAT_SCALE = "Cividis"  # sequential, readable in both themes; set explicitly with zmin/zmax


def stat_grid(values: np.ndarray, label: str, value_range=None, selected=None) -> go.Figure:
    """[layer, head] values as a heatmap: rows are layers (0 at the top), columns heads.

    value_range: (zmin, zmax); None gives 0..max (entropy, distance). `selected` (layer, head) is outlined.
    """
    v = f32(values)
    zmin, zmax = value_range if value_range is not None else (0.0, float(max(np.nanmax(v), 1e-9)))
    n_layer, n_head = v.shape
    height = max(230, 90 + 42 * n_layer)  # two layers drew a 90 px colour bar whose tick labels overlapped
    text = np.char.mod("%.2f", v.astype(np.float64))
    fig = go.Figure(
        go.Heatmap(
            z=v,
            x=list(range(n_head)),
            y=list(range(n_layer)),
            colorscale=STAT_SCALE,
            zmin=zmin,
            zmax=zmax,
            text=text,
            texttemplate="%{text}" if v.size <= 400 else None,
            hovertemplate="layer %{y}, head %{x}<br>" + escape(label) + " = %{z:.4f}<extra></extra>",
            colorbar=dict(title=dict(text=bar_title(label, height), side="right")),
        )
    )
    if selected is not None:
        layer, head = selected
        fig.add_shape(
            type="rect",
            x0=head - 0.5,
            x1=head + 0.5,
            y0=layer - 0.5,
            y1=layer + 0.5,
            line=dict(color="#ff4b4b", width=3),
        )
    fig.update_layout(
        xaxis=dict(title="head", tickmode="array", tickvals=list(range(n_head)), constrain="domain"),
        yaxis=dict(title="layer", tickmode="array", tickvals=list(range(n_layer)), autorange="reversed"),
    )
    return finish(fig, "stat_grid", height, margin=dict(l=60, r=20, t=30, b=50), meta={"statistic": label})


def bar_title(label: str, height: int) -> str:
    """A colour bar's title, escaped, in lines no longer than the bar (the plot's height, ~7 px a character): one line
    ran past the card's top and bottom on a model of one or two layers ('duplicate-token score' on a 150 px bar)."""
    most = max(8, (height - 80) // 8)
    return "<br>".join(escape(line) for line in textwrap.wrap(label, most, break_on_hyphens=False))


def weights_matrix(
    weights: np.ndarray,
    tokens,
    title: str,
    figure: str,
    key_tokens=None,
    boundary=None,
    token_range=None,
    max_ticks: int = MAX_TICKS,
    view: str = "weights",
) -> go.Figure:
    """One [query, key] matrix of probabilities on the 0..1 scale, positional axes, tokens in the hover.

    `boundary`: where sentence B of a pair starts (dashed lines, see plots.pairs), or None. Long texts show a window
    of at most MAX_SHOWN tokens per axis (`token_range`: one range or a Window; the first ones by default), said in
    the title. `max_ticks`: labels per axis (fewer for a half-width chart, so they never overlap). `view`: which of
    analysis.values.VIEWS the matrix holds (value-weighted: what it is, under the title; meta["view"])."""
    key_tokens = tokens if key_tokens is None else key_tokens
    rows, cols = axis_ranges(token_range)
    (q0, q1), (k0, k1) = window(len(tokens), rows), window(len(key_tokens), cols)
    w = f32(np.asarray(weights)[q0:q1, k0:k1])
    if max_ticks <= HALF_WIDTH_TICKS:  # ~380 px wide: a long title ("the cross attention, layer 0, ...") was clipped
        title = "\n".join(textwrap.wrap(title, HALF_WIDTH_TITLE, break_on_hyphens=False))
    if note := range_note(len(tokens), len(key_tokens), (q0, q1), (k0, k1)):
        title += "\n" + note.removeprefix(" · ")
    notes = note_lines(view, 64 if max_ticks <= HALF_WIDTH_TICKS else 110)  # small print: ~5.5 px a character
    extra = 28 * len(notes)  # the notes' lines (each lifts the title a little less than a line), above the plot
    # a half-width matrix is ~200 px wide: at most 420 px tall, or its cells came out three times taller than wide
    tallest = 700 if max_ticks > HALF_WIDTH_TICKS else 420
    key_ticks = ticks(key_tokens, k0, k1, max_ticks)
    # slanted key labels take ~5 px of height a character below the plot: long ones (a merged word on Words) took it
    # from the plot instead, whose rows came out a few pixels tall
    room = max(0, 5 * max(map(len, key_ticks["ticktext"]), default=0) - 60)
    height = max(320, min(tallest, 160 + 18 * (q1 - q0))) + extra + room
    top = 50 + 22 * title.count("\n") + extra  # the title's lines fit
    q_lab = np.array([escape(t) for t in readable_tokens(tokens)[q0:q1]], dtype=object)
    k_lab = np.array([escape(t) for t in readable_tokens(key_tokens)[k0:k1]], dtype=object)
    custom = np.stack(np.broadcast_arrays(q_lab[:, None], k_lab[None, :]), axis=-1)
    fig = go.Figure(
        go.Heatmap(
            z=w,
            x0=k0,
            dx=1,
            y0=q0,
            dy=1,
            colorscale=WEIGHTS_SCALE,
            zmin=0.0,
            zmax=1.0,
            customdata=custom,
            hovertemplate="query %{y} %{customdata[0]}<br>key %{x} %{customdata[1]}<br>%{z:.4f}<extra></extra>",
        )
    )
    fig.update_layout(
        # from the top of the card down: a centred two-line title reached the first query label; Plotly lifts each
        # further line of a top-anchored title by about one line, so the padding grows with them (else it is clipped)
        title=dict(
            text=escape(title).replace("\n", "<br>") + "".join(f"<br><sup>{escape(n)}</sup>" for n in notes),
            yref="container",
            y=1,
            yanchor="top",
            pad_t=10 + 20 * title.count("\n") + 6 * len(notes),
        ),
        # a few px below the axis: with rows a few px tall, the first slanted key label ran into the last query label
        xaxis=dict(title="key", **key_ticks, tickangle=-60 if max_ticks > 20 else -90, ticklabelstandoff=6),
        yaxis=dict(
            title="query",
            **ticks(tokens, q0, q1, min(max_ticks, (height - room - top - 90) // 14)),
            autorange="reversed",
        ),
    )
    finish(fig, figure, height, margin=dict(l=90, r=20, t=top, b=90), meta={"view": view})
    return add_boundary(fig, boundary, ((q0, q1), (k0, k1)))
