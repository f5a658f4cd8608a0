"""Widgets several pages share: head and stage pickers, the token window, a titled figure."""

from __future__ import annotations

import json
import re

import streamlit as st

from ..analysis.values import VIEWS
from ..plots import heatmaps as hm
from ..plots.colours import COLOUR_RANGES
from ..trace import AttentionTrace
from .charts import chart
from .literal import literal
from .state import URL, Selection, url_choice


def head_picker(src: Selection, container=None, disabled: bool = False) -> int:
    """The head slider; bound to the URL so links open on the same head.

    `disabled` greys it out (e.g. while a page pools all heads) without dropping the chosen head from the URL.
    With one head (our module offers n_head = 1) there is nothing to pick: Streamlit refuses a slider from 0 to 0,
    so the page says which head it shows instead.
    """
    return count_slider(container or st, "Head", src.n_head, key="head", disabled=disabled)


def count_slider(where, label: str, n: int, key: str, disabled: bool = False, **kw) -> int:
    """A URL-bound slider over 0..n-1 (heads, layers of a trace), or, for n = 1, a caption naming the only one."""
    if n <= 1:
        where.caption(f"{label}: 0 (the only one)")
        return 0
    return where.slider(label, 0, n - 1, key=key, bind=URL, disabled=disabled, **kw)


def grid_first_head(trace: AttentionTrace, key: str = "grid_from", container=None) -> int:
    """For more than hm.GRID_HEADS heads: the first head a grid draws (URL-bound), and the page says which it draws."""
    if trace.n_head <= hm.GRID_HEADS:
        return 0
    where = container or st
    asked = where.slider(
        f"Heads shown, {hm.GRID_HEADS} at a time: from", 0, trace.n_head - 1, 0, step=hm.GRID_HEADS, key=key, bind=URL
    )
    h0, h1 = hm.grid_heads(trace.n_head, asked)
    where.caption(
        f"The grid draws heads {h0}–{h1 - 1} of {trace.n_head}: at most {hm.GRID_HEADS} at a time, so "
        "the page stays fast. Move the slider to see the others."
    )
    return h0


def open_head(src: Selection, layer: int, head: int, stage: str | None = None) -> None:
    """Point the sidebar at one head (for a click's callback): the head slider, and the layer slider when the layers
    are the model's (our module's single layer is not the model's layer 0); `stage`, the Heads page's stage to open
    with (the view the user was looking at: weights or value-weighted)."""
    if not src.single_layer:
        st.session_state["layer"] = layer
    st.session_state["head"] = head
    if stage is not None:
        st.session_state["stage"] = stage


def open_key(src: Selection, layer: int, head: int, key: int) -> None:
    """Point the Heads page at one head and its "Who reads this token" at one key (for a button's callback)."""
    open_head(src, layer, head)
    st.session_state["hd_key"] = key
    st.session_state["key_picked"] = True  # the Heads page scrolls to who reads it


def scroll_to(anchor: str) -> None:
    """Bring the heading with this anchor into view (after a click that opened something further up the page).

    Only the app's own heading anchors (lower-case words and hyphens) are taken: the script runs in the app's page."""
    if not re.fullmatch(r"[a-z0-9-]{1,40}", anchor):
        raise ValueError(f"not one of the app's heading anchors: {anchor!r}")
    target = json.dumps(f"#{anchor}")
    st.html(
        f"<script>document.querySelector({target})?.scrollIntoView({{block: 'start'}});</script>",
        unsafe_allow_javascript=True,
    )


def stage_picker(trace: AttentionTrace) -> str:
    """The stage selector shared by the Heads and Our module pages (one URL key, "stage")."""
    if not trace.has("scores"):
        st.caption(f"Stage: **weights**, the only stage here. {literal(trace.why_not('scores'))}")
        return "weights"
    stage = st.segmented_control(
        "Stage",
        hm.drawable(trace),  # the four stages, then value-weighted attention when the trace keeps values
        default="weights",
        required=True,
        key="stage",
        bind=URL,
        help="scores = q·k → scaled (× scale) → masked (forbidden pairs removed) → weights (softmax). "
        "value-weighted = weights × ‖v W_O‖ (how much each key's value adds), rows rescaled to sum to 1 "
        "(Kobayashi et al. 2020, “Attention is not only a weight”).",
    )
    return stage or "weights"


VIEW_HELP = (
    "weights = the softmax: how much of each key's value a query takes. value-weighted = weights × ‖v W_O‖, the size "
    "of what each key's value adds through the output projection, rows rescaled to sum to 1 (Kobayashi et al. 2020, "
    "“Attention is not only a weight”): a key with a large weight but a small value, often a sink, fades."
)


def attention_view(trace: AttentionTrace, container=None) -> str:
    """The view beside every weights heatmap outside Heads (URL key "view", shared by the pages): "weights" or
    "value-weighted". Greyed out, saying why in its help, when the trace keeps no values; it then gives "weights"
    and keeps a link's choice for the next trace that can draw it (as the Heads page's "Without sinks" does)."""
    why = trace.why_not("values")
    view = (container or st).segmented_control(
        "View",
        VIEWS,
        default="weights",
        required=True,
        key="view",
        bind=URL,
        disabled=why is not None,
        help=VIEW_HELP + ("" if why is None else f" Not for this trace. {literal(why)}"),
    )
    return view if why is None and view in VIEWS else "weights"


def colour_range(stage: str, container=None) -> str:
    """The colour range of weights heatmaps (URL key "colour", short ids); "linear" for the score stages."""
    if stage not in hm.PROBABILITIES:
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


def columns(name: str, spec, **kw):
    """st.columns inside a keyed container. Keep URL-bound widgets in these, never in plain columns.

    Streamlit's frontend keeps one URL binding per widget and drops it when a copy of the widget unmounts. When an
    unkeyed block moves up the page between two runs (a caption above it vanishes), the new copy of its widgets
    registers first and the stale copy, removed at the end of the run, then unregisters them: from then on moving
    the widget no longer writes the address bar. A keyed container keeps its identity wherever it moves; still, give
    a notice that comes and goes above one a fixed slot (st.empty), as Words does: moving up a place lost the Head
    slider's writes there in about half of the Chromium runs even inside a keyed container.
    """
    return st.container(key=f"row-{name}").columns(spec, **kw)


def token_window(trace: AttentionTrace, limit: int, keys: bool = True):
    """For texts longer than `limit` tokens: which tokens the token-by-token figures draw, or None (all of them).

    keys=True: a query window and a key window chosen apart (URL ids `queries` and `keys`), returned as a Window, so
    late queries can keep the first keys (an attention sink) in view. keys=False: one range for both (`tokens`).
    A range wider than `limit` is drawn from its start, `limit` tokens long, and the page says so.
    """
    if max(trace.n_tokens, trace.n_keys) <= limit:
        return None
    tip = "Long texts are shown through a window so the page stays fast; the overview covers every token."
    if not keys:
        return _token_range(st, "Tokens shown (queries and keys alike)", trace.n_tokens, limit, "tokens", tip)
    left, right = columns("token-window", 2)
    queries = _token_range(left, "Queries shown (rows)", trace.n_tokens, limit, "queries", tip)
    shown = _token_range(right, "Keys shown (columns)", trace.n_keys, limit, "keys", tip)
    return hm.Window(queries, shown)


def key_choice(trace: AttentionTrace, limit: int) -> list[int] | None:
    """For more than `limit` keys: which keys a one-row view takes apart (URL id `keys`), and whether key 0 stays in
    view (`sink`: the first token often takes most of every row's weight). None: every key."""
    if trace.n_keys <= limit:
        return None
    left, right = columns("keys", [3, 1], vertical_alignment="bottom")
    tip = "A long text's keys are shown through a window so the page draws in seconds; the softmax uses every key."
    start, stop = _token_range(left, "Keys shown", trace.n_keys, limit, "keys", tip)
    sink = right.toggle(
        "Keep key 0 in view",
        value=True,
        key="sink",
        bind=URL,
        help="The first token often takes most of every row's weight (an attention sink).",
    )
    return ([0] if sink and start > 0 else []) + list(range(start, stop))


def _token_range(where, label: str, n: int, limit: int, key: str, tip: str) -> tuple[int, int]:
    """A range slider over n tokens (URL-bound); the window actually drawn, said when it is less than asked."""
    if n <= limit:  # cross-attention: one side may fit whole
        return 0, n
    asked = where.slider(f"{label}, at most {limit}", 0, n, (0, limit), key=key, bind=URL, help=tip)
    drawn = hm.window(n, asked, limit)
    if tuple(asked) != drawn:
        where.caption(
            f"Asked for {asked[0]}–{asked[1] - 1}: the page draws at most {limit} at a time, so it draws "
            f"{drawn[0]}–{drawn[1] - 1}. Move the start to see the rest."
        )
    return drawn


def section(fig, title: str, why: str, key: str, *name_parts) -> None:
    """A heading, what the figure shows and why, then the figure at full width."""
    st.subheader(title, divider="gray")
    st.markdown(why)
    chart(fig, *name_parts, key, key=key)
