"""Head statistics: one number per layer x head (Clark et al. 2019; TransformerLens's head detectors). Layout only."""

import streamlit as st

from attnviz import figures, ui
from attnviz.analysis import heads as H
from attnviz.plots import heatmaps as hm

src = ui.current()
st.title("Head statistics")
st.markdown(
    "What does each head look at? Every layer x head reduced to one number, after Clark et al. 2019 "
    "(*What Does BERT Look At?*): how spread out its attention is, how far it looks, and how much goes to special "
    "tokens, punctuation, the previous or next token, or the token itself. Pattern scores follow TransformerLens's "
    "head detectors: the share of the head's attention that lands where a previous-token, duplicate-token or "
    "induction head would put it."
)


def _head(pick) -> tuple[int, int] | None:
    """(layer, head) from the head picker's id ("3-7")."""
    try:
        layer, head = (int(v) for v in str(pick).split("-"))
    except ValueError:
        return None
    return layer, head


tr = ui.get_trace(src)
if tr is None:
    st.stop()
tok = src.model.tokenizer
special = H.special_keys(tr, *H.special_tokens_of(tok))
with st.expander("How these numbers differ from Clark et al.'s code"):
    st.markdown(H.CLARK_DIFFERENCES)

st.subheader("Statistics per head", divider="gray")
left, right = ui.columns("hs-leave-out", 2)
hide = left.toggle(
    "Hide special tokens",
    key="hs_hide",
    bind=ui.URL,
    help="Drop attention to [CLS], [SEP], BOS/EOS, padding; renormalise every row.",
)
leave_out = ui.leave_out_first(right)
if hide:
    st.caption(
        f"Special tokens hidden ({int(special.sum())} of {tr.n_keys:,} positions): their columns are set to 0 and every "
        "row is **renormalised** to sum to 1 again, so the numbers describe how a head shares what it does not give "
        "to special tokens. Special tokens' own rows are left out of the averages."
    )
if leave_out:
    st.caption(
        "Key 0 left out: its column is set to 0 and every row renormalised over the other keys (its own row is "
        "left out of the averages), so a head that parks its attention on the first token is ranked by the rest."
    )
repeat = None
if tr.n_tokens == tr.n_keys:  # induction is self-attention's pattern: cross-attention reads another text
    rep = ui.induction_text(src)  # an encoder-decoder's decoder reads it as its target
    repeat = ui.trace_of_text(src, rep, **({"target": rep} if src.part else {}))
numbers = figures.head_statistics(tr, special, hide, leave_out, repeat)
stats, info = numbers.stats, numbers.info

name = ui.url_choice(st.selectbox, "Statistic", {k: v[0] for k, v in info.items()}, key="hs_stat")
label, meaning, value_range = info[name]
st.caption(f"**{label}**: {meaning}.")
if name == "induction_score":
    st.caption(
        "Measured on 20 random words repeated twice (not on your sentence): an induction head, on the second copy, "
        "attends to the word that followed the earlier copy of the current word. Encoders like BERT rarely have one."
    )
pick = _head(st.session_state.get("hs_pick"))  # the head opened below, outlined on the grid
grid = st.container()  # drawn with the head opened below

st.subheader("Every head, sortable", divider="gray")
st.caption("Click a column header to sort. Shares and scores lie between 0 and 1; entropy is in nats.")
st.dataframe(
    stats.rows(),
    hide_index=True,
    key="hs_table",
    column_config={k: st.column_config.NumberColumn(info[k][0], format="%.3f") for k in info},
)

st.subheader("Open one head", divider="gray")
heads = [(layer, head) for layer in range(tr.n_layer) for head in range(tr.n_head)]
order = sorted(heads, key=lambda lh: -stats[name][lh])
left, right = ui.columns("hs-open", [3, 2], vertical_alignment="bottom")
choice = _head(
    ui.url_choice(
        left.selectbox,
        f"Head (sorted by {label}, highest first)",
        {f"{y}-{h}": f"layer {y}, head {h}: {stats[name][y, h]:.3f}" for y, h in order},
        key="hs_pick",
    )
)
view = ui.attention_view(tr, right)  # weights or value-weighted (weights x ||v W_O||), rows of 1 either way


if st.button(
    "Open it on the Heads page", icon=":material/open_in_new:", on_click=ui.open_head, args=(src, *choice, view)
):
    # query_params={}: without it switch_page clears the URL and fails on URL-bound widgets (they rewrite it)
    st.switch_page("app_pages/heads.py", query_params={})
boundary = ui.pair_boundary(src, tr)
span = ui.token_window(tr, hm.MAX_SHOWN)
drawn = figures.headstats(
    tr, *choice, name, view=view, selected=pick, boundary=boundary, token_range=span, computed=numbers
)
with grid:
    ui.chart(drawn["stat_grid"], "headstats", name)
ui.chart(drawn["head_weights"], "headstats", f"layer{choice[0]}", f"head{choice[1]}", view)
ui.boundary_caption(boundary)
ui.sink_map(tr)  # first-token and learned sinks per layer x head, on one colour scale
ui.provenance(tr)
