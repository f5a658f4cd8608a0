"""Compare: two sentences (a minimal pair), two models or two layers; per-head differences, heads ranked.
Layout only."""

import streamlit as st

from attnviz import ui
from attnviz.analysis import compare as C
from attnviz.errors import AttnvizError
from attnviz.plots import compare as cp
from attnviz.plots import heatmaps as hm

MODES = {"sentences": "Two sentences (a minimal pair)", "models": "Two models", "layers": "Two layers"}
MINIMAL_PAIR = "The dog sat on the mat because it was tired."

src = ui.current()
st.title("Compare")
st.markdown(
    "Put two attention patterns side by side, head by head: the same model on two sentences that differ in one "
    "word, two models on the same sentence, or two layers of one model. Each panel shows **b − a** (orange: more "
    "attention in b, purple: more in a), and the heads are ranked by how much they change."
)
tr = ui.get_trace(src)
if tr is None:
    st.stop()
text, pair = ui.text_inputs()
layer = src.trace_layer
mode = ui.url_choice(st.segmented_control, "Compare", MODES, key="cmp_mode", required=True)
if src.is_module and mode != "sentences":
    st.info("Our module is one layer of its own: compare two sentences with it, or pick a pretrained model.")
    st.stop()
try:
    if mode == "sentences":
        other = st.text_input("Sentence b", value=MINIMAL_PAIR, key="cmp_text", max_chars=2000, bind=ui.URL)
        b = ui.trace_of_text(src, other, pair=pair)
        if b is None:
            st.stop()
        what, label_a, label_b, layer_b = "two sentences", "your sentence", "sentence b", layer
        swapped = C.changed_tokens(tr, b) if tr.n_tokens == b.n_tokens else []
        if swapped:
            st.caption("Tokens that differ: " + ", ".join(f"{i} ({tr.tokens[i]} → {b.tokens[i]})" for i in swapped))
    elif mode == "models":
        name = st.text_input("Model b (hub id or local folder)", value="", key="cmp_model", bind=ui.URL).strip()
        if not name:
            st.info("Name a second model with the same tokenizer and head count (e.g. a fine-tuned copy).")
            st.stop()
        other_src = ui.Selection(ui.get_model(name), None, 0)
        b = ui.trace_of_text(other_src, text, pair=pair)
        if b is None:
            st.stop()
        if layer >= b.n_layer:
            st.warning(f"Model b has {b.n_layer} layers: layer {layer} does not exist there.")
            st.stop()
        what, label_a, label_b, layer_b = "two models", src.label, other_src.label, layer
    else:
        layer_b = st.slider("Layer b", 0, tr.n_layer - 1, min(layer + 1, tr.n_layer - 1), key="cmp_layer", bind=ui.URL)
        b, what, label_a, label_b = tr, "two layers", f"layer {layer}", f"layer {layer_b}"
    result = C.compare_traces(tr, b, layer, layer_b, what)
except AttnvizError as e:
    st.warning(str(e))
    st.stop()

st.caption(f"a = {label_a}, layer {layer}; b = {label_b}" + ("" if mode == "layers" else f", layer {layer_b}") + ".")
measure = ui.url_choice(st.selectbox, "Rank heads by", C.MEASURES, key="cmp_measure")
order = result.ranked(measure)
start, stop = hm.window(tr.n_tokens)
titles = [f"#{r + 1}: head {h} ({result.change[measure][h]:.3f})" for r, h in enumerate(order)]
title = f"b − a, heads from most to least changed ({C.MEASURES[measure]})"
if stop < tr.n_tokens:
    title += f"; tokens {start}–{stop - 1} of {tr.n_tokens}"
diff = result.diff[:, start:stop, start:stop]
boundary = ui.pair_boundary(src, tr)
st.plotly_chart(cp.diff_grid(diff, tr.tokens[start:stop], title, order, labels=titles, boundary=boundary, start=start),
                config=ui.chart_config("compare", mode, f"layer{layer}", f"layer{layer_b}"))  # fmt: skip
st.caption("One colour range for every panel, centred at 0 (white = no change); weights lie in 0..1, so |b − a| ≤ 1.")
ui.boundary_caption(boundary)
st.subheader("Heads ranked", divider="gray")
st.dataframe(result.rows(measure), hide_index=True, key="cmp_table",
             column_config={k: st.column_config.NumberColumn(C.MEASURES[k], format="%.4f") for k in C.MEASURES})  # fmt: skip
ui.provenance(tr)
