"""The Heads page's "who reads this token": pick a key, see the weight every query of every head gives it (numbers
from `AttentionTrace.column`, the figure from attnviz.plots.columns)."""

from __future__ import annotations

import streamlit as st

from ..plots.columns import who_reads as who_reads_figure
from ..plots.common import numbered, tick_labels
from ..trace import AttentionTrace
from ..trace.window_cache import remembered
from .charts import chart
from .state import url_choice
from .widgets import columns


def who_reads(trace: AttentionTrace, layer: int, where: str) -> None:
    """A key picker (URL key `hd_key`) and the [head, query] map of the weight every query gives that key."""
    st.subheader("Who reads this token", anchor="who-reads")
    left, right = columns("who-reads", [1, 3], vertical_alignment="bottom")
    labels = numbered(trace.key_tokens)  # readable plain text ("03 ·cat"): a selectbox
    with left:
        key = url_choice(
            st.selectbox,
            "Key token",
            dict(enumerate(labels)),
            key="hd_key",
            help="The token being read: a column of the heatmaps above. "
            "Clicking a cell of the one-head view picks its column.",
        )
    right.caption(
        "Each row is a head, each column a query: how much of that query's attention goes to the chosen key. "
        "A sink (often key 0) is bright in every row; a previous-token head lights one diagonal cell per head. "
        "**Clicking a column** of the one-head view above picks its key."
    )
    column = key_column(trace, layer, key)  # [head, query], exact: each row's softmax over all its keys
    fig = who_reads_figure(column, trace.tokens, key, tick_labels(trace.key_tokens)[key], where.capitalize())
    chart(fig, f"layer{layer}", f"key{key}", "readers")


@remembered  # read once for every session: a revisit or a redraw of the same key reads it from here
def key_column(trace: AttentionTrace, layer: int, key: int):
    return trace.column(layer, key)
