"""Figures of the Corpus page: every head of a profile as a point (on two statistics, or on the map of their
distances), and one stored example of a head as a small heatmap with its query row marked."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from .common import WEIGHTS_SCALE, escape, finish, readable_tokens
from .geometry import CATEGORY_COLOURS

SCALE = "Viridis"
SELECTED = dict(size=18, color="rgba(0,0,0,0)", line=dict(width=3, color="#d62728"))


def head_colours(prof, colour: str) -> tuple[np.ndarray, str]:
    """The value each head is coloured by, flattened in (layer, head) order, and its label: "layer", "kv_group" (the
    key/value head it shares) or a statistic's name."""
    n_layer, n_head = prof.n_layer, prof.n_head
    if colour == "layer":
        return np.repeat(np.arange(n_layer), n_head).astype(np.float64), "layer"
    if colour == "kv_group":
        groups = int(prof.provenance.get("kv_groups", 1)) or 1
        return np.tile(np.arange(n_head) // groups, n_layer).astype(np.float64), "key/value head"
    return np.asarray(prof.stats[colour], np.float64).ravel(), colour


def _heads_scatter(x, y, prof, colour: str, hover_extra: list[str]) -> go.Scatter:
    c, label = head_colours(prof, colour)
    layers = np.repeat(np.arange(prof.n_layer), prof.n_head)
    heads = np.tile(np.arange(prof.n_head), prof.n_layer)
    text = [
        f"layer {y_}, head {h}<br>{escape(label)} = {v:.4g}<br>{extra}"
        for y_, h, v, extra in zip(layers, heads, c, hover_extra)
    ]
    return go.Scatter(
        x=np.asarray(x, np.float64),
        y=np.asarray(y, np.float64),
        mode="markers",
        name="heads",
        marker=_colour_marker(c, colour, label),
        customdata=np.stack([layers, heads], axis=1).tolist(),
        hovertext=text,
        hovertemplate="%{hovertext}<extra></extra>",
    )


def _colour_marker(c: np.ndarray, colour: str, label: str) -> dict:
    """A continuous scale for layers and statistics; for key/value heads one distinct colour per group (a stepped
    scale, a tick per group), so the query heads sharing one key/value head read as one colour."""
    bar = dict(title=dict(text=escape(label)))
    if colour != "kv_group":
        return dict(size=9, color=c, colorscale=SCALE, showscale=True, colorbar=bar)
    n = int(c.max()) + 1 if len(c) else 1
    palette = [CATEGORY_COLOURS[g % len(CATEGORY_COLOURS)] for g in range(n)]
    steps = [(edge / n, col) for g, col in enumerate(palette) for edge in (g, g + 1)]
    ticks = dict(tickvals=list(range(n)), ticktext=[str(g) for g in range(n)]) if n <= 16 else {}
    return dict(size=9, color=c, colorscale=steps, cmin=-0.5, cmax=n - 0.5, showscale=True, colorbar=bar | ticks)


def _mark(fig: go.Figure, x, y, prof, selected) -> None:
    if selected is None:
        return
    i = selected[0] * prof.n_head + selected[1]
    fig.add_trace(
        go.Scatter(
            x=[float(np.ravel(x)[i])],
            y=[float(np.ravel(y)[i])],
            mode="markers",
            marker=SELECTED,
            name=f"layer {selected[0]}, head {selected[1]}",
            hoverinfo="skip",
        )
    )


def head_finder(prof, x: str, y: str, colour: str, selected=None) -> go.Figure:
    """Every head at (its statistic `x`, its statistic `y`), coloured by `colour` (see head_colours); `selected`
    (layer, head) is ringed. customdata [layer, head] lets a click pick a head."""
    xs, ys = prof.stats[x].ravel(), prof.stats[y].ravel()
    hover = [f"{escape(x)} = {a:.4g}<br>{escape(y)} = {b:.4g}" for a, b in zip(xs, ys)]
    fig = go.Figure(_heads_scatter(xs, ys, prof, colour, hover))
    _mark(fig, xs, ys, prof, selected)
    fig.update_xaxes(title_text=escape(x))
    fig.update_yaxes(title_text=escape(y))
    return finish(fig, "corpus_head_finder", 460, top=40, showlegend=False, meta={"x": x, "y": y, "colour": colour})


def head_map(coords: np.ndarray, prof, colour: str, selected=None) -> go.Figure:
    """Every head at its classical-MDS coordinates [layer x head, 2] of the Jensen-Shannon distances: heads that
    attend alike lie close together."""
    hover = [f"map ({a:.3f}, {b:.3f})" for a, b in coords]
    fig = go.Figure(_heads_scatter(coords[:, 0], coords[:, 1], prof, colour, hover))
    _mark(fig, coords[:, 0], coords[:, 1], prof, selected)
    fig.update_xaxes(title_text="map axis 1")
    fig.update_yaxes(title_text="map axis 2", scaleanchor="x", scaleratio=1)
    return finish(fig, "corpus_head_map", 460, top=40, showlegend=False)


def example_heatmap(example: dict, title: str, rows: dict | None = None, tokens=None) -> go.Figure:
    """One example of a head as a small heatmap, its query row marked (a red frame, the row labelled "query").

    rows (attnviz.corpus.maps.example_rows): the query and the rows around it, live, over a window of keys; without
    them (the sidebar's model is not the profile's), the stored row alone: its strongest keys' weights and blank
    cells for the keys it did not keep, over the positions up to the furthest of them (named by `tokens` if given)."""
    q = int(example["query"])
    if rows is not None:
        z = np.asarray(rows["weights"], np.float64)
        (a, b), (k0, k1) = rows["queries"], rows["keys"]
        ylabels = [f"{i} {t}" for i, t in zip(range(a, b), readable_tokens(rows["query_tokens"]))]
        xlabels = [f"{j} {t}" for j, t in zip(range(k0, k1), readable_tokens(rows["key_tokens"]))]
        marked, note = q - a, "" if (k0, k1) == (0, rows["n_keys"]) else f"keys {k0}-{k1 - 1} of {rows['n_keys']}"
    else:
        keys = [int(k) for k in example["keys"]]
        width = max([q, *keys]) + 1
        z = np.full((1, width), np.nan)
        z[0, keys] = example["key_weights"]
        shown = readable_tokens(tokens) if tokens else []
        xlabels = [f"{j} {shown[j]}" if j < len(shown) else str(j) for j in range(width)]
        ylabels = [f"{q} {shown[q]}" if q < len(shown) else str(q)]
        marked, note = 0, "stored row: its strongest keys"
    ylabels[marked] = f"query {ylabels[marked]}"
    fig = go.Figure(
        go.Heatmap(
            z=z,
            x=[escape(v) for v in xlabels],
            y=[escape(v) for v in ylabels],
            zmin=0,
            zmax=1,
            colorscale=WEIGHTS_SCALE,  # every weight heatmap's: a zero weight dark on both themes, not white
            showscale=False,
            hoverongaps=False,
            hovertemplate="query %{y}<br>key %{x}<br>weight %{z:.3f}<extra></extra>",
        )
    )
    fig.add_shape(
        type="rect",
        xref="paper",
        x0=0,
        x1=1,
        yref="y",
        y0=marked - 0.5,
        y1=marked + 0.5,
        line=dict(color="#d62728", width=2),
    )
    fig.update_xaxes(
        type="category",
        showticklabels=len(xlabels) <= 24,
        tickangle=-45,
        title_text=escape(note),
        title_font=dict(size=11),
    )
    fig.update_yaxes(type="category", autorange="reversed", tickfont=dict(size=10))
    fig.update_layout(title=dict(text=escape(title), font=dict(size=13)))
    meta = {"query": q, "text_id": int(example["text_id"]), "live": rows is not None, "marked_row": marked}
    return finish(fig, "corpus_example", 120 + 16 * len(ylabels), top=40, showlegend=False, meta=meta)
