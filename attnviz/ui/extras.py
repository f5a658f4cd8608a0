"""Captions and expanders for what some models add to attention: where the scale was applied, attention sinks and
logit softcapping (numbers from attnviz.analysis.extras, figures from attnviz.plots.extras)."""

from __future__ import annotations

import streamlit as st

from ..analysis import extras
from ..plots import extras as figures
from ..trace import AttentionTrace
from .widgets import chart_config


def scale_note(trace: AttentionTrace, layer: int) -> None:
    """Where this layer's model applied the scale, as a caption (nothing for a weights-only trace)."""
    text = extras.scale_site(trace, layer)
    if text:
        st.caption(f"**Where the scale is applied.** {text}")


def sinks_and_softcap(trace: AttentionTrace, layer: int, head: int) -> None:
    """An expander per extra the layer has: the sink's share of each query, the scores before and after the cap."""
    share = extras.sink_share(trace, layer, head)
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
            st.plotly_chart(figures.sink_share_bars(trace.tokens, share, head), theme=None,
                            config=chart_config(f"layer{layer}", f"head{head}", "sink"))  # fmt: skip
    cap = extras.softcap_values(trace, layer, head)
    if cap is not None:
        with st.expander(f"Logit softcapping: scores squeezed into ±{cap.cap:g}", expanded=True):
            st.markdown(
                f"Before the mask, this model passes every scaled score x through **{cap.cap:g} × tanh(x / "
                f"{cap.cap:g})**: small scores go through almost unchanged, large ones are squeezed towards "
                f"±{cap.cap:g} and never cross it, so no single key can take a row over by a huge score. The "
                "**scaled** stage on this page is already capped; the chart shows each visible cell before (x) and "
                "after (y) the cap."
            )
            squeezed = float((abs(cap.before - cap.after) > 0.01 * abs(cap.before)).mean()) if cap.before.size else 0
            st.caption(f"Head {head}: the cap changed {squeezed:.1%} of the visible scores by more than 1%.")
            st.plotly_chart(figures.softcap_curve(cap, head), theme=None,
                            config=chart_config(f"layer{layer}", f"head{head}", "softcap"))  # fmt: skip
