"""Rollout: attention followed down through the layers (Abnar & Zuidema 2020). Layout only."""

import streamlit as st

from attnviz import figures, ui
from attnviz.analysis import rollout as R
from attnviz.errors import AttnvizError
from attnviz.plots import common
from attnviz.plots import headstats as hp
from attnviz.plots import heatmaps as hm

src = ui.current()
st.title("Rollout")
st.markdown(
    "A late layer's attention mixes tokens that earlier layers have already mixed, so its weights do not say which "
    "**input** tokens an output draws on. **Attention rollout** (Abnar & Zuidema 2020) follows attention down: each "
    "layer's heads are averaged, the residual connection is added as `0.5·A + 0.5·I` (half of every token's signal "
    "skips attention), rows are renormalised, and the layers' matrices are multiplied."
)
tr = ui.get_trace(src)
if tr is None:
    st.stop()
if tr.n_tokens != tr.n_keys:
    st.info("Rollout needs self-attention: this trace has different query and key tokens.")
    ui.stop(tr)
start, end = 0, tr.n_layer - 1
if tr.n_layer > 1:
    start, end = st.slider("Layers (start, end)", 0, tr.n_layer - 1, (0, tr.n_layer - 1), key="ro_layers", bind=ui.URL)
boundary = ui.pair_boundary(src, tr)
span = ui.token_window(tr, hm.MAX_SHOWN)
drawn = figures.rollout(tr, end, 0, start, end, span, boundary, hp.HALF_WIDTH_TICKS)  # side by side: fewer labels

left, right = st.columns(2, gap="large")
with left:
    ui.chart(drawn["rollout"], "rollout", f"layers{start}-{end}")
    st.caption("Row i: how much output token i draws on each input token. Every row sums to 1.")
with right:
    ui.chart(drawn["raw_last"], "raw", f"layer{end}")
    st.caption("The same layer's own weights, averaged over its heads: what one layer does, not the whole path.")
ui.boundary_caption(boundary)

st.subheader("Attention flow", divider="gray")
st.markdown(
    "**Attention flow** treats the same residual-adjusted matrices as a network of pipes (capacity = weight) and "
    "asks how much can flow from one output token down to each input token: a maximum-flow problem per pair, "
    "normalised so that one output token's values sum to 1. "
    f"It is expensive, so it is computed for one output token at a time and for texts of up to {R.MAX_FLOW_TOKENS} "
    "tokens."
)
labels = common.numbered(tr.tokens)
query = ui.url_choice(st.selectbox, "Output token", dict(enumerate(labels)), key="ro_query")
if tr.n_tokens > R.MAX_FLOW_TOKENS:
    st.info(
        f"This text has {tr.n_tokens:,} tokens; attention flow is computed for up to {R.MAX_FLOW_TOKENS:,}. "
        "Rollout above works at any length."
    )
else:
    try:
        with st.spinner("Solving one maximum-flow problem per input token…"):
            _, bars = figures.flow(tr, query, start, end, drawn.rollout)
    except AttnvizError as e:
        ui.show_error(e, "info")
    else:
        ui.chart(bars, "flow", f"query{query}")
        st.caption(
            "Each input's value is the most that could reach it alone (its maximum flow), divided by the sum over "
            "all inputs, as Abnar & Zuidema's code does: the orange bars sum to 1 like rollout's row. The maximum "
            "flows overlap (they share pipes), so a share says how an input ranks, not a part of one flow."
        )
ui.provenance(tr)
