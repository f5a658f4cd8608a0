"""Masks: what padding, causal and hide masks remove, where the attention goes instead, and fully masked rows."""

import streamlit as st

from attnviz import figures, ui
from attnviz.analysis import masks as analysis
from attnviz.plots import common
from attnviz.plots import heatmaps as hm
from attnviz.plots import masks as mp
from attnviz.ui.mask_experiment import dead_note, leak_caption, mask_traces

APPLY = {"layer": "this layer only", "all": "all layers"}
CROSS_CAUSAL = ("Cross-attention: target token i may see source tokens up to i + (source length − target length), the "
                "two texts aligned at their ends.")  # fmt: skip


def show(drawn, name: str, why: str, key: str) -> None:
    ui.section(drawn[name], drawn.title(name), why, key, "masks", src.model.name, f"layer{src.layer}")


src = ui.current()
st.title("Masks: which keys may a query see?")
st.caption(
    "A mask replaces the scaled scores of forbidden cells with a fill value before the softmax, so they get (almost) no weight."
)
base = ui.get_trace(src)
if base is None:
    st.stop()
if not base.has("masked"):
    st.info(f"Masks cannot be applied inside this model. {base.why_not('masked')} Try the bundled model.")
    ui.stop(base)
n_real, layer = base.n_tokens, src.trace_layer
c1, c2, c3, c4 = ui.columns("masks", [2, 3, 2, 2])
# fmt: off
seq2seq = src.part is not None  # an encoder-decoder: the experiment changes the attention chosen in the sidebar
pad_to = c1.number_input("Pad to N tokens (0 = none)", 0, min(ui.max_tokens(), src.model.max_tokens), 0, key="pad_to",
                         bind=ui.URL, disabled=not src.applies_padding or seq2seq, help="An encoder-decoder reads one source "
                         "text: no padding." if seq2seq else f"The sentence has {n_real:,} tokens; a larger N appends "
                         "padding tokens, as in a batch.")
pad_mask = c1.toggle("Padding mask", True, key="pad_mask", bind=ui.URL, disabled=not src.applies_padding or pad_to <= n_real,
                     help="Off: padding tokens stay visible to every query, as if the batch forgot its attention_mask.")
own = analysis.own_causal(base, layer)  # GPT-2 and kin: the model's own mask already hides the future
# off for a pretrained model (padding alone first); on for our module, which cannot pad
causal = c2.toggle("Causal mask (no looking ahead)", src.single_layer, key="causal", bind=ui.URL, disabled=own,
                   help="This model is causal: its own mask always hides future keys." if own else CROSS_CAUSAL
                   if src.part == "cross" else None) and not own
hide = ui.url_choice(c2.multiselect, "Hide tokens (no query may attend them)", key="hide", multi=True,
                    options=dict(enumerate(common.numbered(base.key_tokens))))
apply = ui.url_choice(c3.radio, "Apply to", APPLY, key="apply", disabled=not src.applies_padding)
head = ui.head_picker(src, c4)
# fmt: on
fill = ui.url_choice(st.radio, "Fill value for masked cells", ui.FILL_LABELS, key="fill", horizontal=True)
if analysis.hides_everything(hide, base.n_keys):
    st.warning(analysis.ALL_HIDDEN)
    st.stop()

layers = None if apply == "all" else (layer,)
opts = analysis.mask_options(single_layer=src.single_layer, pad_to=pad_to, pad_mask=pad_mask, causal=causal, hide=hide,
                             layers=layers, fill=ui.fill_value(fill), part=src.part)  # fmt: skip
with ui.heavy(max(n_real, pad_to) > ui.LIGHT_TOKENS):  # three traces and a report: queued at the page's bounds
    traces = mask_traces(src, opts)
    if traces is None:
        ui.stop(base)
    with_mask, without, model_own = traces
    notes, first = st.container(), st.container()  # chart 1 goes above the window slider: on the first screen
    window = ui.token_window(with_mask, hm.MAX_SHOWN, keys=False)  # long texts: rows a..b, each over all its keys
    boundary = ui.pair_boundary(src, with_mask)
    cross = src.part == "cross"  # keys are the source text: drawn whole, labelled with its tokens
    drawn = figures.masks(
        with_mask, layer, head, without, model_own, n_real, base.n_keys, ui.FILL_IDS[fill], window, boundary, cross
    )
rep = drawn.report
kept = analysis.own_mask_words(model_own, layer)
with notes:
    if src.applies_padding and 0 < pad_to <= n_real:
        st.info(f"Padding needs N above the sentence's {n_real:,} tokens.")
    if own:
        st.info("**This model is causal**: its own mask hides every future key, in every layer, whatever the toggle "
                "says (the grey triangle in chart 1). attnviz keeps a model's own mask, so *without your masks* below "
                "still has that triangle: a causal model never computes attention to the future, so there is nothing "
                "true to show there. Hide a token or pad the text to add a mask of your own.")  # fmt: skip
    st.markdown(
        analysis.reach_note(layers, src.layer, base.n_layer, src.single_layer, src.part, kept, bool(rep.change.any()))
        + f" Shown: layer {src.layer}, head {head}."
    )
    if rep.dead_rows:
        st.warning(dead_note(rep.dead_rows, ui.FILL_IDS[fill], with_mask.n_keys, src.layer, head))
with first:
    show(
        drawn,
        "mask_stages",
        "**scaled → masked**: grey cells are removed. They hold the fill value, so the softmax gives them weight 0. "
        "A causal mask removes the upper triangle, hiding a token removes its column, padding removes the pad columns.",
        "stages",
    )
    if not rep.masks_anything and not own:  # a causal model's note above already says what to try
        st.info(analysis.NOTHING_MASKED)
show(
    drawn,
    "mask_weights",
    (
        "Left: the same layer with only the model's own causal mask (none of yours). "
        if own
        else "Left: the same layer with every key visible (no causal, hidden or padding mask). "
    )
    + "Rows still sum to 1, so the "
    "weight the removed keys had is shared out among the keys that remain (difference: orange gained, purple lost).",
    "weights",
)
show(drawn, "mask_leak", leak_caption(layers, base.n_layer, kept, bool(rep.change.any())), "leak")
dead = (
    f" In this experiment, query rows {[d.query for d in rep.dead_rows]} have every key masked."
    if rep.dead_rows
    else ""
)
show(
    drawn,
    "fill_demo",
    f"The scaled row of query {rep.demo_query} ({ui.literal(common.readable_tokens(with_mask.tokens)[rep.demo_query])}), softmaxed with each fill value. "
    "With every key masked, a finite fill makes the row uniform (1/n each: the query averages everything); "
    f"−inf gives zeros (it attends to nothing). With some keys visible, every fill gives the same weights.{dead} "
    + mp.fill_demo_note(with_mask.n_keys),
    "fills",
)
ui.boundary_caption(boundary)
ui.provenance(with_mask)
