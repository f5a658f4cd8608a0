"""Compare: two sentences (a minimal pair), two models or two layers; per-head differences, heads ranked.
Layout only."""

import streamlit as st

from attnviz import figures, ui
from attnviz.analysis import compare as C
from attnviz.errors import AttnvizError
from attnviz.plots import heatmaps as hm
from attnviz.plots.common import readable_tokens as readable

MODES = {"sentences": "Two sentences (a minimal pair)", "models": "Two models", "layers": "Two layers"}

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
left, right = ui.columns("cmp-mode", [3, 2], vertical_alignment="bottom")
mode = ui.url_choice(left.segmented_control, "Compare", MODES, key="cmp_mode", required=True)
view = ui.attention_view(tr, right)  # b − a of the weights, or of value-weighted attention (both sides keep values)
if src.single_layer and mode != "sentences":
    st.info("Our module is one layer of its own: compare two sentences with it, or pick a pretrained model.")
    ui.stop(tr)
try:
    if mode == "sentences":
        tok = src.model.tokenizer
        swap = C.minimal_pair(text, lambda t: len(tok(t, split_special_tokens=True)["input_ids"]))
        typed = st.text_input(
            "Sentence b",
            value="",
            key="cmp_text",
            max_chars=ui.TEXT_LIMITS["cmp_text"],
            bind=ui.URL,
            placeholder=swap[0] if swap else "Type a sentence with as many tokens as yours",
            help="Left empty: your sentence with one word swapped, checked with this model's "
            "tokenizer so that both have the same number of tokens.",
        ).strip()
        if not typed and swap is None:
            st.info("No one-word swap keeps your sentence's token count with this tokenizer: type sentence b.")
            st.stop()
        if not typed:
            st.caption(
                f"Sentence b is yours with **{ui.literal(swap[1])}** swapped for **{ui.literal(swap[2])}** (type your own above)."
            )
        other = typed or swap[0]
        b = ui.trace_of_text(src, other, pair=pair)
        if b is None:
            ui.stop(tr)
        what, label_a, label_b, layer_b = "two sentences", "your sentence", "sentence b", layer
        swapped = C.changed_tokens(tr, b) if tr.n_tokens == b.n_tokens else []
        if swapped:
            st.caption(
                "Tokens that differ: "
                + ", ".join(
                    f"{i} ({ui.literal(readable(tr.tokens)[i])} → {ui.literal(readable(b.tokens)[i])})" for i in swapped
                )
            )
    elif mode == "models":
        name = st.text_input(
            "Model b (hub id or local folder)",
            value="",
            key="cmp_model",
            bind=ui.URL,
            max_chars=ui.TEXT_LIMITS["cmp_model"],
        ).strip()
        if not name:
            st.info(
                "Name a second model with the same tokenizer (e.g. a fine-tuned copy, or a smaller or larger "
                "model of the same family: a different head count is compared with each layer's heads averaged)."
            )
            ui.stop(tr)
        model_b = ui.get_model(name)
        other_src = ui.Selection(model_b, None, 0, src.part if model_b.is_seq2seq else None)
        b = ui.trace_of_text(other_src, text, pair=pair)
        if b is None:
            ui.stop(tr)
        if layer >= b.n_layer:
            st.warning(f"Model b has {b.n_layer} layers: layer {layer} does not exist there.")
            ui.stop(tr)
        what, label_a, label_b, layer_b = "two models", src.label, other_src.label, layer
    else:
        layer_b = st.slider("Layer b", 0, tr.n_layer - 1, min(layer + 1, tr.n_layer - 1), key="cmp_layer", bind=ui.URL)
        b, what, label_a, label_b = tr, "two layers", f"layer {layer}", f"layer {layer_b}"
    pairs = C.heads_pair(tr, b)  # models of different head counts or widths: each layer's heads averaged
    pooled = (
        st.toggle(
            "Average the heads",
            not pairs,
            key="cmp_pool",
            bind=ui.URL,
            disabled=not pairs,
            help="Compare each layer's heads averaged (rows still sum to 1) instead of head by head."
            if pairs
            else f"a has {tr.n_head} heads and b has {b.n_head}: heads cannot be paired, so each "
            "side's heads are averaged.",
        )
        or not pairs
    )
except AttnvizError as e:
    ui.show_error(e)
    ui.stop(tr)

side_a, side_b = (
    (label_a, label_b) if mode == "layers" else (f"{label_a}, layer {layer}", f"{label_b}, layer {layer_b}")
)
above = st.empty()  # cleared when the figures cannot be drawn
with above.container():
    st.caption(f"a = {ui.literal(side_a)}; b = {ui.literal(side_b)}.")  # labels name a user's model or text
    measure = ui.url_choice(st.selectbox, "Rank heads by", C.MEASURES, key="cmp_measure")
window, boundary = ui.token_window(tr, hm.MAX_SHOWN), ui.pair_boundary(src, tr)  # queries and keys apart, as on Heads
try:
    drawn = figures.compare(tr, layer, 0, b, layer_b, measure, view, pooled, what, boundary, window)
except AttnvizError as e:
    above.empty()
    ui.show_error(e)
    ui.stop(tr)
if pooled and not pairs:
    st.caption(
        f"a has {tr.n_head} heads and b has {b.n_head}: heads cannot be paired, so each side's "
        f"{'layer' if mode != 'layers' else 'heads'} is compared with its heads averaged."
    )
ui.chart(drawn["diff_grid"], "compare", mode, f"layer{layer}", f"layer{layer_b}", view)
drawn_view = "weights" if view == "weights" else "value-weighted attention"
st.caption(
    f"One colour range for every panel, centred at 0 (white = no change); the {drawn_view} lie in 0..1, so |b − a| ≤ 1."
)
ui.boundary_caption(boundary)
st.subheader("Heads averaged" if pooled else "Heads ranked", divider="gray")
st.dataframe(
    drawn.table,
    hide_index=True,
    key="cmp_table",
    column_config={k: st.column_config.NumberColumn(C.MEASURES[k], format="%.4f") for k in C.MEASURES},
)
ui.provenance(tr)
