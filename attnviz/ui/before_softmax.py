"""What a model does to q·k before the softmax, said next to the figures: where it applied the scale, and logit
softcapping (numbers from attnviz.analysis.scale_site and .softcap, figures from attnviz.plots.softcap)."""

from __future__ import annotations

import streamlit as st

from ..analysis.scale_site import scale_site
from ..analysis.softcap import softcap_values
from ..plots.softcap import softcap_curve
from ..trace import AttentionTrace
from .charts import chart


def scale_note(trace: AttentionTrace, layer: int) -> None:
    """Where this layer's model applied the scale, as a caption (nothing for a weights-only trace)."""
    text = scale_site(trace, layer)
    if text:
        st.caption(f"**Where the scale is applied.** {text}")


def softcap_panel(trace: AttentionTrace, layer: int, head: int) -> None:
    """An expander with the scores before and after the cap, when the layer caps its logits."""
    cap = softcap_values(trace, layer, head)
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
            chart(softcap_curve(cap, head), f"layer{layer}", f"head{head}", "softcap")
