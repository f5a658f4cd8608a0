"""Neuron view: one query token in one head, from its vectors to its weights. Layout only."""

import streamlit as st

from attnviz import figures, ui
from attnviz.errors import AttnvizError
from attnviz.plots import common
from attnviz.plots import heatmaps as hm

src = ui.current()
st.title("Neuron view")
st.markdown(
    "One query token in one head, taken apart: its **query vector** q, every **key vector** k, their elementwise "
    "product (whose sum is the score q·k), then the **scaled** score, the **mask**, the **masked** score and the "
    "softmax **weight**. Every number is the one the Heads page draws."
)
tr = ui.get_trace(src)
if tr is None:
    st.stop()
layer = src.trace_layer
labels = common.numbered(tr.tokens)
left, right = ui.columns("query", 2)
head = ui.head_picker(src, left)
query = ui.url_choice(right.selectbox, "Query token", dict(enumerate(labels)), key="nv_query")
keys = ui.key_choice(tr, hm.MAX_SHOWN)  # a long text: a window of keys, key 0 (often a sink) kept on request
try:
    drawn = figures.neuron(tr, layer, head, query, keys)
except AttnvizError as e:
    ui.show_error(e, "info")
    ui.stop(tr)

st.subheader(f"{ui.literal(labels[query])} in {src.where}, head {head}", divider="gray")
ui.chart(drawn["neuron_vectors"], "neuron", layer, head, query)
st.dataframe(drawn.table, hide_index=True, key="nv_table")
values = drawn.values
st.caption(
    "Masked cells hold the fill the model uses (a huge negative number), so their weight is 0. "
    "Weights sum to 1 over the keys."
    + (
        " ‖v W_O‖ is the size of what this head writes into the residual stream from each key per unit of weight (its "
        "value through the head's slice of the output projection); weight × ‖v W_O‖ is what the query really takes "
        "from it (Kobayashi et al. 2020, “Attention is not only a weight”): a large weight on a small value adds little."
        if values is not None
        else ""
    )
)

st.subheader("Weights × values", divider="gray")
if values is None:
    st.info(
        f"{ui.literal(tr.why_not('values'))} Choose the bundled model or **Our module** as the source in the sidebar "
        "to see each key's value vector, scaled by its weight, and their sum: the head's output for this token."
    )
else:
    st.markdown(
        "Each key's value vector v is multiplied by its weight; the sum is this head's output for the query "
        "(before the output projection mixes the heads)."
    )
    st.dataframe(values, key="nv_values")
ui.provenance(tr)
