"""Ablation: remove heads from the forward pass and watch the next-token prediction and the later heads change.
Layout only."""

import streamlit as st

from attnviz import ui
from attnviz.ablation import MODES
from attnviz.analysis import compare as C
from attnviz.plots import ablation as ap
from attnviz.plots.common import readable_tokens
from attnviz.ui import ablation as ua

src = ui.current()
st.title("Ablation")
st.markdown(
    "Does this head matter? Remove some heads' outputs from the forward pass and see what the model predicts "
    "without them. A head's output is its slice of what enters its layer's output projection: **zero** sets it to "
    "0, **mean** replaces it by its average over the positions (the head still adds what it adds on average, but no "
    "longer depends on where it looks). The model runs twice on your sentence, with and without the heads."
)
tr = ui.get_trace(src)
if tr is None:
    st.stop()
why = ua.why_no_ablation(src)
if why:
    st.info(ui.literal(why))  # the reason names the model (a user's id)
    ui.stop(tr)
left, right = ui.columns("abl-heads", [2, 3], gap="large")
with left:
    heads = ua.heads_to_remove(src)
with right:
    ua.click_heads(src, heads)  # the same heads on a layer x head grid: a click adds or removes one
c1, c2 = st.columns(2)
with c1:
    mode = ui.url_choice(st.segmented_control, "Remove them by", ua.MODE_LABELS, key="abl_mode", required=True)
with c2:
    target = st.text_input(
        "Target token (empty: the most likely one before)",
        key="abl_target",
        bind=ui.URL,
        max_chars=ua.TARGET_CHARS,
        help="A token of the model's vocabulary whose logit change is "
        "reported, as listed below (·cat is ' cat'), or a token id.",
    )
if not heads:
    st.info("Choose at least one head to remove.")
    ui.stop(tr)
text, pair = ui.text_inputs()
if pair:
    st.caption("The second sentence is left out here: the prediction is the next token after your sentence.")
result = ua.get_ablation(src, heads, mode, target)
if result is None:
    ui.stop(tr)

before, after = result.target_probs
shown = ", ".join(f"L{layer} H{head}" for layer, head in result.heads)
last = ui.literal(readable_tokens(result.tokens)[result.position])
st.caption(
    f"Removed: {ui.literal(shown)} ({MODES[mode]}). The prediction is the token after the last one, **“{last}”**."
)
st.subheader("The prediction", divider="gray")
m1, m2, m3 = st.columns(3)
m1.metric(f"Target {ui.literal(readable_tokens([result.target_token])[0])}: probability before", f"{before:.4f}")
m2.metric("after", f"{after:.4f}", delta=C.short_number(after - before))
m3.metric("logit change (after − before)", C.short_number(result.target_logit_change))
st.caption(
    "The most likely next tokens with the heads (before) and without them (after); a token that only one "
    "side ranks high is listed too."
)
ui.chart(ap.prediction_bars(result), "ablation", "prediction", mode)
st.subheader("Which later heads changed", divider="gray")
st.caption(
    "Each cell: how far that head's attention moved, the Jensen-Shannon divergence of its weights after vs before "
    "(nats, averaged over its query rows; 0 = the same, at most ln 2 ≈ 0.693). Removed heads are outlined in red; "
    "grey layers come before or at the first removed head and cannot change."
)
change = ap.change_grid(result.attention_change(), result, "Attention change per head (JSD after vs before)")
ui.chart(change, "ablation", "change", mode)
ui.provenance(tr)
