"""The Corpus page's query-key space of the chosen head: the profile's sampled queries and keys, drawn by the same
figure as the Query-key space page (attnviz.plots.geometry), computed by attnviz.corpus.qk_store."""

from __future__ import annotations

import streamlit as st

from ..analysis import geometry as GE
from ..corpus.qk_store import sample_geometry, text_groups
from ..errors import AttnvizError
from ..plots import geometry as gp
from .charts import chart
from .literal import literal, show_error
from .state import URL, url_choice
from .widgets import columns

COLOURS = {"position": "position in its text", "token": "token", "text": "text"}


def query_key_section(prof, layer: int, head: int) -> None:
    """The section: its explanation, three controls (all in the link) and the figure, or why there is none."""
    st.subheader(f"Query-key space of layer {layer}, head {head}", divider="gray", anchor="cp-qk")
    sample = prof.qk
    if sample is None:
        why = (prof.provenance.get("qk_sample") or {}).get(
            "why_not"
        ) or "it was made without one (qk_samples=0, or by an earlier attnviz)"
        st.info(f"This profile keeps no sample of queries and keys: {literal(why)}")
        return
    left, mid, right = columns("cp-qk-controls", [1, 1, 1], vertical_alignment="bottom")
    with left:
        method = url_choice(st.segmented_control, "Projection", GE.METHODS, key="cp_qk_method", default="pca")
    with mid:
        colour = url_choice(st.selectbox, "Colour by", COLOURS, key="cp_qk_colour", default="position")
    with right:
        normalised = st.toggle("Normalised", value=True, key="cp_qk_norm", bind=URL, help=_NORMALISED)
    method = method or "pca"  # a segmented control can be emptied by clicking its choice again
    try:
        with st.spinner(f"Projecting with {GE.METHODS[method]}…"):
            geo = sample_geometry(sample, layer, head, method, normalised)
    except AttnvizError as e:
        show_error(e, "info")
        return
    texts = len(sample.per_text())
    st.caption(
        f"The query and the key of {sample.n:,} tokens the profile sampled from {texts:,} texts (at most "
        f"{int(prof.provenance['settings'].get('qk_per_text', 0)):,} from one text), projected together as on the "
        "*Query-key space* page: circles are queries, diamonds keys. "
        f"q·k vs −distance: r = **{geo.before:.2f}** raw, **{geo.after:.2f}** normalised, counted only over pairs "
        "of one text that the mask allows: a query never meets a key of another text, so q·k across texts is not "
        "attention, even where such points lie close."
    )
    for note in [geo.note, *sample.notes[layer]]:
        if note:
            st.caption(literal(note))
    groups = text_groups(sample) if colour == "text" else None
    title = f"Layer {layer}, head {head}: {sample.n:,} sampled tokens ({GE.METHODS[geo.method]})"
    fig = gp.query_key_space(
        geo,
        [t["token"] for t in sample.tokens],
        colour=colour,
        groups=groups,
        title=title,
        positions=[t["position"] for t in sample.tokens],
        hovers=gp.sample_hovers(sample.tokens),
    )
    chart(fig, "corpus", f"layer{layer}", f"head{head}", "query-key", method)


_NORMALISED = (
    "Keys moved so their centre meets the queries', queries × a and keys ÷ a so their mean norms match: no weight "
    "changes (every score of a query shifts by one amount, which the softmax ignores)."
)
