"""Widgets several pages share: head and stage pickers, the token window, a titled figure."""

from __future__ import annotations

import json

import streamlit as st

from ..plots import common
from ..plots.heatmaps import COLOUR_RANGES
from ..trace import AttentionTrace
from .literal import literal
from .state import URL, Selection, url_choice


def head_picker(src: Selection, container=None, disabled: bool = False) -> int:
    """The head slider; bound to the URL so links open on the same head.

    `disabled` greys it out (e.g. while a page pools all heads) without dropping the chosen head from the URL.
    """
    return (container or st).slider("Head", 0, src.n_head - 1, key="head", bind=URL, disabled=disabled)


def open_head(src: Selection, layer: int, head: int) -> None:
    """Point the sidebar at one head (for a click's callback): the head slider, and the layer slider when the layers
    are the model's (our module's single layer is not the model's layer 0)."""
    if src.pretrained:
        st.session_state["layer"] = layer
    st.session_state["head"] = head


def scroll_to(anchor: str) -> None:
    """Bring the heading with this anchor into view (after a click that opened something further up the page)."""

    from streamlit.components.v1 import html

    target = json.dumps(f"#{anchor}")
    html(f"<script>window.parent.document.querySelector({target})?.scrollIntoView({{block: 'start'}});</script>", 0)


def stage_picker(trace: AttentionTrace) -> str:
    """The stage selector shared by the Heads and Our module pages (one URL key, "stage")."""
    if not trace.has("scores"):
        st.caption(f"Stage: **weights**, the only stage here. {literal(trace.why_not('scores'))}")
        return "weights"
    stage = st.segmented_control(
        "Stage",
        trace.available_stages,
        default="weights",
        required=True,
        key="stage",
        bind=URL,
        help="scores = q·k → scaled (× scale) → masked (forbidden pairs removed) → weights (softmax).",
    )
    return stage or "weights"


def colour_range(stage: str, container=None) -> str:
    """The colour range of weights heatmaps (URL key "colour", short ids); "linear" for the score stages."""
    if stage != "weights":
        return "linear"
    return url_choice(
        (container or st).radio,
        "Colour range",
        COLOUR_RANGES,
        key="colour",
        horizontal=True,
        help="Long texts put most weights near 1/tokens, which a linear 0..1 scale draws almost all dark. "
        "Per-row max scales each query's row to its largest weight; power 0.5 and log stretch the small weights. "
        "Hover always shows the true weight.",
    )


def token_window(trace: AttentionTrace, limit: int) -> tuple[int, int] | None:
    """For texts longer than `limit` tokens, a range slider choosing which tokens the heatmaps show."""
    if trace.n_tokens <= limit:
        return None
    return st.slider(
        f"Tokens shown (at most {limit} at a time, queries and keys alike)",
        0,
        trace.n_tokens,
        (0, limit),
        key="tokens",
        help="Long texts are shown through a window so the page stays fast; the overview below covers every token.",
    )


def section(fig, title: str, why: str, key: str, *name_parts) -> None:
    """A heading, what the figure shows and why, then the figure at full width."""
    st.subheader(title, divider="gray")
    st.markdown(why)
    st.plotly_chart(fig, key=key, theme=None, config=chart_config(*name_parts, key))


def chart_config(*name_parts) -> dict:
    """The modebar config of every chart: the camera saves the format chosen in the sidebar (PNG or SVG)."""
    return common.chart_config(*name_parts, fmt=st.session_state.get("img_fmt", "png"))
