"""Sentence pairs: where sentence A ends, the four blocks A->A, A->B, B->A, B->B and what crosses. Layout only."""

import streamlit as st

from attnviz import figures, ui
from attnviz.analysis import pairs as P
from attnviz.errors import AttnvizError

src = ui.current()
st.title("Sentence pairs")
st.markdown(
    "Models like BERT read two sentences at once (a question and a passage, a premise and a hypothesis). Which "
    "heads stay inside one sentence, and which ones connect the two? Every head's attention is split into four "
    "blocks: **A->A** (sentence A reading itself), **A->B**, **B->A** and **B->B**."
)
tr = ui.get_trace(src)
if tr is None:
    st.stop()
if ui.text_inputs()[1] is None:
    st.info("Type a **Second sentence** in the sidebar to see how attention moves between two sentences.")
    ui.stop(tr)
try:  # the tokenizer's sequence ids mark the boundary; without them separators, or sentence A's own token count
    boundary, rule = ui.find_pair_boundary(src, tr)
except AttnvizError as e:
    ui.show_error(e)
    ui.stop(tr)
if boundary is None:
    st.info(f"No boundary between the sentences here: {rule}.")
    ui.stop(tr)
end = P.real_length(tr.layer_mask(src.trace_layer), tr.n_tokens)
st.caption(
    f"Sentence A: tokens 0–{boundary - 1}, sentence B: tokens {boundary}–{end - 1} ({rule}). "
    "The dashed line marks the boundary on the heatmap." + (" Padding is left out." if end < tr.n_tokens else "")
)

layer, where = src.trace_layer, src.where
view = ui.attention_view(tr)  # the blocks, the crossing share and the heatmap below: weights or value-weighted
of = "" if view == "weights" else " (value-weighted)"
every_head = st.container()  # drawn with the head picked below (the blocks compare every head of the layer)
st.subheader("One head with the boundary", divider="gray")
head = ui.head_picker(src)
drawn = figures.pairs(tr, layer, head, view, boundary, where)
with every_head:
    st.subheader(f"The four blocks, every head of {where}{of}", divider="gray")
    st.caption(
        "Each bar: the mean over the block's query rows of the "
        + ("weight they give" if view == "weights" else "value-weighted share they take from")
        + " the block's keys."
    )
    ui.chart(drawn["pair_blocks"], "pairs", f"layer{layer}", "blocks", view)
    st.subheader(f"Attention crossing between the sentences{of}", divider="gray")
    st.caption("Of all the attention the real tokens give, the share that lands on the other sentence.")
    ui.chart(drawn["pair_crossing"], "pairs", f"layer{layer}", "crossing", view)
    st.dataframe(
        drawn.table,
        hide_index=True,
        key="pair_table",
        column_config={k: st.column_config.NumberColumn(k, format="%.3f") for k in drawn.shares},
    )
ui.chart(drawn["pair_head"], "pairs", f"layer{layer}", f"head{head}", view)
ui.provenance(tr)
