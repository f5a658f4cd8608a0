"""Attention sinks on the pages: the learned sink's share of each query (numbers from attnviz.analysis.sinks, figures
from attnviz.plots.sinks)."""

from __future__ import annotations

import streamlit as st

from ..analysis.sinks import learned_sink_by_query
from ..plots.sinks import sink_share_bars
from ..trace import AttentionTrace
from .before_softmax import softcap_panel
from .widgets import chart_config


def learned_sink_panel(trace: AttentionTrace, layer: int, head: int) -> None:
    """An expander with the share of each query the learned sink took, when the layer has one (gpt-oss)."""
    share = learned_sink_by_query(trace, layer, head)
    if share is not None:
        with st.expander(f"Attention sink: what head {head} gave away", expanded=True):
            st.markdown(
                "This model adds a **sink** to every row's softmax: one extra logit the query can attend to, learned "
                "per head (or computed from each token), that is dropped after the softmax. The weights of a row "
                "therefore sum to **less than 1**; the rest, 1 − the row's sum, went to the sink and reads nothing. "
                "A tall bar is a query that mostly *declined* to attend to any token."
            )
            st.caption(
                f"Head {head}: on average {share.mean():.1%} of a query's attention went to the sink "
                f"(least {share.min():.1%}, most {share.max():.1%})."
            )
            st.plotly_chart(sink_share_bars(trace.tokens, share, head), theme=None,
                            config=chart_config(f"layer{layer}", f"head{head}", "sink"))  # fmt: skip


def sinks_and_softcap(trace: AttentionTrace, layer: int, head: int) -> None:
    """An expander per extra the layer has: the learned sink's share of each query, the scores before and after the
    cap."""
    learned_sink_panel(trace, layer, head)
    softcap_panel(trace, layer, head)
