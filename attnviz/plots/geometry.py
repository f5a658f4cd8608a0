"""Figures of a head's joint query-key space (from attnviz.analysis.geometry): queries and keys as two marker kinds,
coloured by position, token, sentence or role; and small multiples of every head of a layer."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..analysis.geometry import METHODS, Geometry
from .common import escape, f32, finish, readable_tokens

SYMBOLS = {False: "circle", True: "diamond"}  # queries, keys
KIND = {False: "query", True: "key"}
KINDS = {False: "queries", True: "keys"}
KIND_COLOURS = {False: "#1f77b4", True: "#d62728"}  # the small multiples colour by kind alone
CATEGORY_COLOURS = (
    "#1f77b4",
    "#ff7f0e",
    "#2ca02c",
    "#d62728",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#17becf",
    "#bcbd22",
    "#7f7f7f",
)
OTHER = "#c7c7c7"
MOST_TOKENS = len(CATEGORY_COLOURS)  # colour by token: the most frequent tokens get a colour, the rest are "other"
CONTEXT = 4  # tokens either side of a point's own token in its hover
GL_ABOVE = 3_000  # more points than this are drawn with WebGL (SVG markers slow the page down)


def context(tokens: list[str], i: int, width: int = CONTEXT) -> str:
    """The token `i` in bold with `width` readable tokens either side, escaped for Plotly."""
    left, right = tokens[max(0, i - width) : i], tokens[i + 1 : i + 1 + width]
    dots = lambda cut: "… " if cut else ""  # noqa: E731
    return (
        f"{dots(i > width)}{escape(' '.join(left))} <b>{escape(tokens[i])}</b> {escape(' '.join(right))}"
        f"{' …' if i + 1 + width < len(tokens) else ''}"
    )


def _hover(geo: Geometry, queries: list[str], keys: list[str], hovers=None) -> list[str]:
    out = []
    for is_key, pos in zip(geo.is_key, geo.position):
        side = keys if is_key else queries
        if hovers is not None:  # a sample of many texts: each token's own line (sample_hovers)
            out.append(f"{KIND[bool(is_key)]}, {hovers[pos]}")
        else:
            out.append(f"{KIND[bool(is_key)]} {pos}: {escape(side[pos])}<br>{context(side, int(pos))}")
    return out


def sample_hovers(tokens: list[dict]) -> list[str]:
    """The hover line of each token of a corpus sample (dicts with text_id, position, token, before, after): its text
    and position, the token in bold with the tokens either side, escaped for Plotly."""
    out = []
    for t in tokens:
        shown = readable_tokens([*t["before"], t["token"], *t["after"]])
        i = len(t["before"])
        out.append(
            f"text {t['text_id']}, position {t['position']}: {escape(shown[i])}<br>"
            f"{escape(' '.join(shown[:i]))} <b>{escape(shown[i])}</b> {escape(' '.join(shown[i + 1 :]))}"
        )
    return out


def _categories(geo: Geometry, colour: str, queries: list[str], keys: list[str], groups) -> list[str]:
    """The category of every point: its readable token (the most frequent ones) or its group (sentence, role)."""
    if colour == "token":
        names = [(keys if k else queries)[p] for k, p in zip(geo.is_key, geo.position)]
        common = {t for t, _ in Counter(names).most_common(MOST_TOKENS)}
        return [t if t in common else "other" for t in names]
    q_groups, k_groups = groups
    return [str((k_groups if k else q_groups)[p]) for k, p in zip(geo.is_key, geo.position)]


def _scatter(n_points: int):
    return go.Scattergl if n_points > GL_ABOVE else go.Scatter


def _axes_titles(geo: Geometry) -> tuple[str, str]:
    if geo.explained is None:
        return f"{METHODS[geo.method]} 1", f"{METHODS[geo.method]} 2"
    return tuple(f"PC {i + 1} ({100 * s:.0f}% of the variance)" for i, s in enumerate(geo.explained))


def query_key_space(
    geo: Geometry,
    tokens,
    key_tokens=None,
    colour: str = "position",
    groups=None,
    title: str = "",
    positions=None,
    hovers=None,
) -> go.Figure:
    """Queries (circles) and keys (diamonds) of one head in 2-D; `colour` "position" (a colour scale), "token",
    "sentence" or "role" (categories; `groups`: (query labels, key labels) for these and any other category). A
    point's customdata is [0 for a query or 1 for a key, its token index], which a click hands back.

    A sample of many texts gives each token's position in its own text (`positions`, coloured instead of the index)
    and its hover line (`hovers`, from sample_hovers) instead of neighbours in `tokens`."""
    queries = readable_tokens(tokens)
    keys = queries if key_tokens is None else readable_tokens(key_tokens)
    hover, xy = np.array(_hover(geo, queries, keys, hovers), dtype=object), f32(geo.xy)
    custom = np.c_[geo.is_key.astype(np.int32), geo.position.astype(np.int32)]
    scatter, fig = _scatter(len(xy)), go.Figure()
    shade = geo.position if positions is None else np.asarray(positions)[geo.position]
    top = max(1, max(geo.n_queries, geo.n_keys) - 1) if positions is None else max(1, int(np.max(positions)))
    cats = None if colour == "position" else np.array(_categories(geo, colour, queries, keys, groups), dtype=object)
    palette, shown = {}, set()
    if cats is not None:
        order = sorted(set(cats), key=lambda c: (c == "other", c))
        palette = {
            c: OTHER if c == "other" else CATEGORY_COLOURS[i % len(CATEGORY_COLOURS)] for i, c in enumerate(order)
        }
    for is_key in (False, True):
        side = geo.is_key == is_key
        if cats is None:
            marker = dict(
                color=f32(shade[side]),
                colorscale="Viridis",
                cmin=0,
                cmax=top,
                colorbar=dict(title=dict(text="position", side="right"), thickness=14) if not is_key else None,
                showscale=not is_key,
            )
            fig.add_trace(
                scatter(
                    x=xy[side, 0],
                    y=xy[side, 1],
                    mode="markers",
                    name=KINDS[is_key],
                    marker=marker | dict(symbol=SYMBOLS[is_key], size=8, line=dict(width=0.5, color="#333")),
                    customdata=custom[side],
                    hovertext=hover[side],
                    hoverinfo="text",
                )
            )
            continue
        for cat, col in palette.items():
            pick = side & (cats == cat)
            if pick.any():
                fig.add_trace(
                    scatter(
                        x=xy[pick, 0],
                        y=xy[pick, 1],
                        mode="markers",
                        legendgroup=cat,
                        name=escape(cat),
                        showlegend=cat not in shown,
                        customdata=custom[pick],
                        marker=dict(color=col, symbol=SYMBOLS[is_key], size=8, line=dict(width=0.5, color="#333")),
                        hovertext=hover[pick],
                        hoverinfo="text",
                    )
                )
                shown.add(cat)
    if cats is not None:  # the two marker kinds, once, in the legend (the colours name the categories)
        for is_key in (False, True):
            fig.add_trace(
                scatter(
                    x=[None],
                    y=[None],
                    mode="markers",
                    name=KINDS[is_key],
                    legendgroup="kinds",
                    marker=dict(color="#888", symbol=SYMBOLS[is_key], size=8),
                    hoverinfo="skip",
                )
            )
    x_title, y_title = _axes_titles(geo)
    fig.update_xaxes(title_text=x_title, zeroline=False, ticklabelstandoff=6)
    fig.update_yaxes(title_text=y_title, zeroline=False, scaleanchor="x", scaleratio=1, ticklabelstandoff=6)
    legend = (
        dict(orientation="v", x=1.02, y=1, xanchor="left")
        if cats is not None  # a list of categories: beside
        else dict(orientation="h", yanchor="bottom", y=1.01, xanchor="left", x=0)
    )  # two kinds: above the plot
    return finish(
        fig,
        "query_key_space",
        height=580,
        top=90,
        title=dict(text=title, y=0.98, yanchor="top", yref="container"),
        clickmode="event+select",
        meta={"points": len(xy), "colour": colour},
        legend=legend,
    )


def head_panels(geos: list[Geometry], tokens, key_tokens=None, title: str = "", cols: int = 4) -> go.Figure:
    """Every head of a layer, one small panel each (PCA), queries in blue and keys in red; each panel's title gives
    the correlation of q.k with -distance after the normalisation."""
    queries = readable_tokens(tokens)
    keys = queries if key_tokens is None else readable_tokens(key_tokens)
    cols = max(1, min(cols, len(geos)))
    rows = math.ceil(len(geos) / cols)
    names = [f"head {h} · r = {g.after:.2f}" for h, g in enumerate(geos)]
    fig = make_subplots(
        rows=rows, cols=cols, subplot_titles=names, horizontal_spacing=0.03, vertical_spacing=0.25 / rows
    )
    for h, geo in enumerate(geos):
        xy, hover = f32(geo.xy), np.array(_hover(geo, queries, keys), dtype=object)
        for is_key in (False, True):
            side = geo.is_key == is_key
            fig.add_trace(
                _scatter(len(xy))(
                    x=xy[side, 0],
                    y=xy[side, 1],
                    mode="markers",
                    name=KINDS[is_key],
                    legendgroup=KIND[is_key],
                    showlegend=h == 0,
                    hovertext=hover[side],
                    hoverinfo="text",
                    marker=dict(color=KIND_COLOURS[is_key], size=4, symbol=SYMBOLS[is_key]),
                ),
                row=h // cols + 1,
                col=h % cols + 1,
            )
    fig.update_xaxes(showticklabels=False, zeroline=False)
    fig.update_yaxes(showticklabels=False, zeroline=False)
    return finish(fig, "query_key_heads", height=80 + 200 * rows, top=80, title=title)
