"""The Ablation page's data and head control: which heads to remove (URL-bound), and the cached ablation."""

from __future__ import annotations

import streamlit as st

from ..ablation import Ablation
from ..errors import AttnvizError
from ..hf.ablate import ablate, check_model
from ..plots.ablation import head_picker
from .charts import chart
from .clicks import selected_head, toggle_head
from .data import get_model
from .literal import show_error
from .state import TEXT_LIMITS, Selection, max_tokens, text_inputs, url_choice

MOST_HEADS = 16  # heads removed at once on the page (the API takes more)
MODE_LABELS = {"zero": "zero", "mean": "mean over positions"}
TARGET_CHARS = TEXT_LIMITS["abl_target"]


def why_no_ablation(src: Selection) -> str | None:
    """Why heads cannot be removed from the selected source, in words; None when they can."""
    if src.single_layer:
        return (
            "Our module is one attention layer on its own, with no language-model head after it: there is no "
            "prediction for removing a head to change. Pick a pretrained decoder (such as 'gpt2') in the sidebar."
        )
    try:
        check_model(src.model)
    except AttnvizError as e:
        return str(e)
    return None


def heads_to_remove(src: Selection, key: str = "abl_heads") -> list[tuple[int, int]]:
    """A multiselect of "L3 H5" labels (ids "3-5" in the link), at most MOST_HEADS; a link naming more keeps the
    first MOST_HEADS."""
    n_layer, n_head = src.model.n_layer, src.model.n_head
    options = {f"{layer}-{head}": f"L{layer} H{head}" for layer in range(n_layer) for head in range(n_head)}
    linked = st.query_params.get_all(key)
    if len(linked) > MOST_HEADS:
        st.query_params[key] = linked[:MOST_HEADS]
    kept = st.session_state.get(key)
    if isinstance(kept, list) and len(kept) > MOST_HEADS:
        st.session_state[key] = kept[:MOST_HEADS]
    picked = url_choice(
        st.multiselect,
        f"Heads to remove (at most {MOST_HEADS})",
        options,
        key=key,
        multi=True,
        default=[f"0-{min(1, n_head - 1)}"],
        max_selections=MOST_HEADS,
        placeholder="Choose heads, e.g. L0 H1",
    )
    return [tuple(int(v) for v in p.split("-")) for p in picked]


def click_heads(src: Selection, heads, key: str = "abl_heads") -> None:
    """The layer x head grid beside the multiselect: a click on a square adds that head or puts it back (the
    multiselect, with its own clear-all button, and the link follow); past MOST_HEADS a click is refused, and the page
    says so."""
    n_layer, n_head = src.model.n_layer, src.model.n_head

    def toggle():
        tile = selected_head(st.session_state.get("abl-grid"), n_layer, n_head)
        if tile is not None:
            picked = [p for p in st.session_state.get(key) or [] if isinstance(p, str)]
            st.session_state[key], st.session_state["_abl_full"] = toggle_head(
                picked, f"{tile[0]}-{tile[1]}", MOST_HEADS
            )

    st.caption("**Click a square** to remove that head (filled red) or to put it back.")
    chart(
        head_picker(n_layer, n_head, heads),
        "ablation",
        "heads",
        key="abl-grid",
        on_select=toggle,
    )
    if st.session_state.pop("_abl_full", False):
        st.warning(f"At most {MOST_HEADS} heads can be removed at once: click a red square to put one back first.")


@st.cache_resource(max_entries=8, show_spinner="Running the model with the heads and without them…")
def _cached(model_name: str, text: str, heads: tuple, mode: str, target: str | None, limit: int) -> Ablation:
    return ablate(get_model(model_name), text, list(heads), mode, target, max_tokens=limit)


def get_ablation(src: Selection, heads, mode: str, target: str) -> Ablation | None:
    """The ablation of the sidebar's sentence (cached for every session); None after saying why there is none."""
    text, _ = text_inputs()
    target = str(target or "")[:TARGET_CHARS].strip() or None
    try:
        return _cached(src.model.name, text, tuple(sorted(heads)), mode, target, max_tokens())
    except AttnvizError as e:
        show_error(e, "warning")
        return None
