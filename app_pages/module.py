"""Our module: the from-scratch MultiHeadAttention, its heads, and its parity with the pretrained layer. Layout only."""

from dataclasses import replace

import streamlit as st

from attnviz import ui
from attnviz.module.tracing import module_code, parity
from attnviz.plots import heatmaps as hm

src = ui.current()
st.title("Our module")
st.markdown(
    "`attnviz.MultiHeadAttention` (attnviz/module/multihead.py): attention from scratch, every stage kept; how: below."
)


def _use_module():
    st.session_state["source"] = "module"


if src.single_layer:
    st.caption(f"Settings in the sidebar · now: {ui.literal(src.label)}")
else:
    src = ui.module_preview(src)
    what = f"copying layer {src.layer}" if src.module_source().mirrors_layer else "with random weights"
    c1, c2 = st.columns([4, 1], vertical_alignment="center")
    c1.info(f"A preview: our module {what}. Switch to set its inputs, weights and heads.")  # one line: chart in view
    c2.button("Use our module", on_click=_use_module, type="primary", icon=":material/build:")
ms = src.module_source()
tr = ui.get_trace(src)
if tr is None:
    st.stop()

if ms.mirrors_layer:
    ref = ui.get_trace(replace(src, module=None))
    if ref is not None:
        diff = parity(tr, ref, src.layer)
        c1, c2 = st.columns([1, 2], vertical_alignment="center")
        c1.metric(
            f"Largest |difference| vs layer {src.layer}",
            f"{diff:.1e}" if diff else "0",
            help="Max over heads, queries and keys of |our weight − pretrained weight|. With weights copied from the "
            "layer and run on the vectors entering it, our module reproduces the library's attention weights (up to "
            "float32 rounding at most).",
        )
        with c2:
            if diff < 1e-5:
                st.badge(
                    "Identical" if diff == 0 else "Matches the pretrained layer", icon=":material/check:", color="green"
                )
            else:
                st.badge("Differs from the pretrained layer", icon=":material/warning:", color="orange")
elif src.single_layer:
    st.caption(
        "To check it against the pretrained model, set **Weights** to *copied from the layer* and "
        "**Input vectors** to *hidden states entering the layer* in the sidebar."
    )

left, right = ui.columns("stage", [3, 2], vertical_alignment="bottom")  # five stages need 3/5 of the width
with left:
    stage = ui.stage_picker(tr)
colours = ui.colour_range(stage, right)
span = ui.token_window(tr, hm.MAX_SHOWN)
boundary = ui.pair_boundary(src, tr)
st.subheader(f"Its {tr.n_head} heads")
if note := hm.stage_note(tr, 0, stage):
    st.caption(note)
ui.chart(hm.head_grid(tr, 0, stage, token_range=span, colours=colours, boundary=boundary), "module", stage, "heads")
st.subheader("One head up close")
left, right = ui.columns("head", [1, 2.4], gap="large")
with left:
    head = ui.head_picker(src)
    st.markdown(
        "Rows are queries, columns are keys; each row of **weights** sums to 1. "
        "Hover a cell for the weight, the raw score and the scaled score."
    )
with right:
    ui.chart(
        hm.head_detail(tr, 0, head, stage, token_range=span, colours=colours, boundary=boundary),
        "module",
        f"head{head}",
        stage,
    )
    ui.boundary_caption(boundary)

st.subheader("How it works")
st.latex(
    r"\mathrm{head}_i = \mathrm{softmax}\!\Big(\mathrm{mask}\big(\tfrac{(XW_q)_i\,(XW_k)_i^{\top}}{\sqrt{d_\mathrm{head}}}\big)\Big)\,(XW_v)_i"
    r"\qquad \mathrm{out} = [\mathrm{head}_1;\dots;\mathrm{head}_h]\,W_o"
)
st.markdown(
    "1. **Project**: four separate linear layers make queries, keys and values (W_q, W_k, W_v) and mix the heads' "
    "outputs at the end (W_o).\n"
    "2. **Split heads**: each d_model vector is cut into n_head pieces of d_head = d_model / n_head numbers; "
    "every head attends on its own piece.\n"
    "3. **Attend**: per head, scores = q·k, scaled by 1/√d_head, masked, softmaxed into weights that mix the values.\n"
    "4. **Merge heads**: the pieces are put back side by side and W_o projects them to d_model again."
)
with st.expander("Read the code (attnviz/attention.py, attnviz/module/)", icon=":material/code:"):
    st.code(module_code(), language="python", line_numbers=True)

st.subheader("Use it from Python")
st.code(ms.snippet(ui.text_inputs()[0]), language="python")
ui.provenance(tr)
