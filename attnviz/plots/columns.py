"""Who reads a token: the weight every query gives one key, per head ([head, query], from `AttentionTrace.column`)."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from .common import MAX_TICKS, WEIGHTS_SCALE, escape, f32, finish, tick_labels, ticks


def who_reads(
    column: np.ndarray, tokens, key: int, key_label: str, title: str, heads=None, head_labels=None
) -> go.Figure:
    """column [head, query]: the weight each query gives `key`, as a heatmap with one row per head (in the order of
    `heads`, default 0..n) and one column per query, on the 0..1 scale; hover names the query and the head.
    `key_label`: the key's tick label (escaped, see common.tick_labels)."""
    n_head, n_query = column.shape
    heads = list(range(n_head)) if heads is None else [int(h) for h in heads]
    labels = head_labels or [f"head {h}" for h in heads]
    queries = np.array(tick_labels(tokens)[:n_query], dtype=object)
    image = dict(
        type="heatmap",
        z=f32(column[heads]),
        x0=0,
        dx=1,
        y=labels,
        customdata=np.broadcast_to(queries, (len(heads), n_query)),
        colorscale=WEIGHTS_SCALE,
        zmin=0.0,
        zmax=1.0,
        hovertemplate="%{y}<br>query %{customdata}<br>weight on the key %{z:.4f}<extra></extra>",
        colorbar=dict(title=dict(text="weight", side="right"), thickness=14),
    )
    x = ticks(tokens, 0, n_query, MAX_TICKS // 2) | dict(
        tickangle=-60, title=dict(text="query (reading)"), showgrid=False
    )
    y = dict(autorange="reversed", type="category", showgrid=False, tickfont=dict(size=10))
    return finish(
        dict(data=[image], layout=dict(xaxis=x, yaxis=y)),  # as dicts: not validated (see finish)
        "who_reads",
        height=max(260, 120 + 16 * len(heads)),
        top=50,
        meta={"key": key},
        title=dict(text=f"{escape(title)}: who reads {key_label}"),
    )
