"""Query-key space: one head's queries and keys in one picture (AttentionViz, Yeh et al. 2023). Layout only."""

import streamlit as st

from attnviz import figures, ui
from attnviz.analysis import geometry as GE
from attnviz.errors import AttnvizError

src = ui.current()
st.title("Query-key space")
st.markdown(
    "Every token gives a head a **query** (what it looks for) and a **key** (what it offers). Here both are drawn as "
    "points in one space, so that a query sits near the keys it attends to. Raw queries and keys often form two "
    "separate clouds; they are first made comparable **without changing any weight**: queries × a and keys ÷ a "
    "(every q·k unchanged), and the keys moved so their centre meets the queries' (every score of a query shifts by "
    "the same amount, which the softmax ignores)."
)
tr = ui.get_trace(src)
if tr is None:
    st.stop()
if not tr.has("vectors"):
    st.info(f"There are no query and key vectors to draw. {ui.literal(tr.why_not('vectors'))}")
    ui.stop(tr)
layer = src.trace_layer

left, mid, right = ui.columns("qk-controls", [1, 1, 1], vertical_alignment="bottom")
with left:
    head = ui.head_picker(src)
with mid:
    method = ui.url_choice(
        st.segmented_control,
        "Projection",
        GE.METHODS,
        key="qk_method",
        default="pca",
        help="PCA is exact and deterministic; UMAP and t-SNE keep neighbours, not distances.",
    )
with right:
    colour = ui.url_choice(st.selectbox, "Colour by", GE.COLOURS, key="qk_colour", default="position")
normalised = st.toggle(
    "Normalised (translate and rescale the keys; no weight changes)", value=True, key="qk_norm", bind=ui.URL
)
method = method or "pca"  # a segmented control can be emptied by clicking its choice again

try:
    with st.spinner(f"Projecting with {GE.METHODS[method]}…"):
        drawn = figures.geometry(tr, layer, head, method, colour, normalised)
except AttnvizError as e:
    ui.show_error(e, "info")
    ui.stop(tr)

geo = drawn.geometry
st.subheader(f"Head {head} of {src.where}", anchor="qk-space")
st.caption(
    f"Correlation of the scaled score q·k with −distance over the pairs the mask allows: **{geo.before:.2f}** for "
    f"the raw vectors, **{geo.after:.2f}** after the normalisation (a = {geo.a:.3g}). The nearer 1, the more a short "
    "distance means a high score; where the raw number is the higher one, the raw picture (switch *Normalised* off) is the "
    "more faithful. Circles are queries, diamonds keys. **Click a point** to pick its token."
)
for note in [geo.note, *GE.layer_notes(tr, layer)]:
    if note:
        st.caption(ui.literal(note))


def _pick():
    """A click on the query-key space: its point's token becomes the picked one."""
    st.session_state["qk_picked"] = ui.selected_point(st.session_state.get("qk-space"), tr.n_tokens, tr.n_keys)


ui.chart(
    drawn["query_key_space"],
    f"layer{layer}",
    f"head{head}",
    "query-key",
    method,
    key="qk-space",
    on_select=_pick,
)
picked = ui.point_in(st.session_state.get("qk_picked"), tr.n_tokens, tr.n_keys)  # the trace may have changed
if picked is not None:
    is_key, position = picked
    side = tr.key_tokens if is_key else tr.tokens
    st.markdown(f"Picked the **{'key' if is_key else 'query'}** {position}: {ui.literal(side[position])}")
    if is_key or tr.n_keys == tr.n_tokens:  # a query's token is a key too in self-attention
        if st.button(
            "Open on Heads (who reads this token)",
            icon=":material/open_in_new:",
            on_click=ui.open_key,
            args=(src, layer, head, position),
        ):
            st.switch_page("app_pages/heads.py", query_params={})  # {}: URL-bound widgets rewrite it there

st.subheader(f"Every head of {src.where}", divider="gray")
st.caption(
    f"PCA of each head's normalised queries (blue) and keys (red), at most {GE.PANEL_POINTS:,} points a panel; r is "
    "the correlation of q·k with −distance after the normalisation."
)
ui.chart(drawn["query_key_heads"], f"layer{layer}", "query-key", "heads")
ui.provenance(tr)
