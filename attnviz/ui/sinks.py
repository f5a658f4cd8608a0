"""Attention sinks on the pages: the learned sink's share of each query, the sink map of Head statistics, and the
options that leave the sink out (numbers from attnviz.analysis.sinks, figures from attnviz.plots.sinks)."""

from __future__ import annotations

import numpy as np
import streamlit as st

from ..analysis.sinks import has_learned_sinks, learned_sink_by_query, learned_sink_share, sink_share
from ..plots.sinks import sink_maps, sink_share_bars
from ..trace import AttentionTrace
from ..trace.window_cache import memo
from .before_softmax import softcap_panel
from .charts import chart
from .state import URL


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
            chart(sink_share_bars(trace.tokens, share, head), f"layer{layer}", f"head{head}", "sink")


def sinks_and_softcap(trace: AttentionTrace, layer: int, head: int) -> None:
    """An expander per extra the layer has: the learned sink's share of each query, the scores before and after the
    cap."""
    learned_sink_panel(trace, layer, head)
    softcap_panel(trace, layer, head)


def without_sinks(trace: AttentionTrace, stage: str, container=None) -> tuple[int, ...]:
    """The Heads page's "Without sinks" toggle (URL key `hd_nosink`): the sink key(s) whose weight the heatmaps drop,
    each row renormalised over the other keys; () when off or the stage is not weights."""
    where = container or st
    on = where.toggle(
        "Without sinks",
        key="hd_nosink",
        bind=URL,
        disabled=stage != "weights",
        help="Leave out key 0 (the first token, where many heads park their attention) and renormalise every row "
        "over the other keys, to see where a head looks besides its sink. Weights only.",
    )
    return (0,) if on and stage == "weights" else ()


def leave_out_first(container=None) -> tuple[int, ...]:
    """Head statistics' "Leave out key 0" toggle (URL key `hs_nosink`): keys its statistics and pattern scores drop."""
    off = (container or st).toggle(
        "Leave out key 0",
        key="hs_nosink",
        bind=URL,
        help="Drop the first token (often an attention sink) from every row and renormalise over the other keys, as "
        "HeadVis leaves position 0 out of its ranking; the first token's own row is left out of the averages.",
    )
    return (0,) if off else ()


def sink_map(trace: AttentionTrace) -> None:
    """Head statistics' sink map: per layer x head, the share of attention key 0 takes and (a model with learned
    sinks) the share the learned sink takes, on one colour scale."""
    first = memo(trace, ("sink_share", (0,)), lambda: sink_share(trace, keys=(0,)))
    learned = None
    if any(has_learned_sinks(trace, i) for i in range(trace.n_layer)):
        learned = memo(trace, "learned_sink_share", lambda: learned_sink_share(trace))
    st.subheader("Attention sinks", divider="gray")
    st.markdown(
        "Many heads give most of each row to the **first token** when nothing else in the row matters to them: the "
        "softmax must put its weight somewhere. Each cell is the mean share of a row that went to key 0 (rows that "
        "may see it; padding left out)"
        + (
            "; beside it, the share this model's **learned sink** took (a logit in every row's softmax that belongs "
            "to no key, so a row's weights sum to less than 1). Both maps use one colour scale."
            if learned is not None
            else "."
        )
    )
    top = np.unravel_index(np.nanargmax(first), first.shape) if np.isfinite(first).any() else None
    if top is not None:
        st.caption(f"Most to key 0: layer {top[0]}, head {top[1]} ({first[top]:.1%} of a row on average).")
    chart(sink_maps(first, learned, trace.key_tokens[0]), "headstats", "sinks")
