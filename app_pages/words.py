"""Words: sub-word pieces merged back into whole words (sum over keys, mean over queries). Layout only."""

import streamlit as st

from attnviz import figures, ui
from attnviz.analysis import heads as H
from attnviz.analysis import words as W

src = ui.current()
st.title("Words")
st.markdown(
    "Tokenizers cut rare words into pieces, and attention runs between the pieces. Here the pieces of each word "
    f"are put back together. {W.RULE}"
)
tr = ui.get_trace(src)
if tr is None:
    st.stop()
tok = src.model.tokenizer
special = H.special_keys(tr, tok.all_special_ids, tok.all_special_tokens)
detected = W.detect_scheme(tr.key_tokens)
auto = "the tokenizer's own words" if tr.key_word_ids is not None else f"detected: {W.SCHEMES[detected]}"
scheme = ui.url_choice(
    st.selectbox,
    "Sub-word convention",
    {s: auto if s == "auto" else W.SCHEMES[s] for s in ["auto", *W.SCHEMES]},
    key="w_scheme",
)
scheme = None if scheme == "auto" else scheme
about = st.container()  # the count of words, once they are found below
notice = st.empty()  # one slot whether it shows or not: the URL-bound controls below never move up a place
layer, where = src.trace_layer, src.where
left, right = ui.columns("words-head", [3, 2], vertical_alignment="bottom")
head = ui.head_picker(src, left)
view = ui.attention_view(tr, right)  # weights or value-weighted: rows of 1 either way, so merged rows are too
boundary = ui.pair_boundary(src, tr)
drawn = figures.words(tr, layer, head, scheme, view, special, boundary, where)  # cross-attention: target over source
groups, key_groups = drawn.groups, drawn.key_groups
about.caption(
    f"{tr.n_tokens:,} tokens → {len(groups):,} words. Special tokens ([CLS], [SEP], <s>, padding) stay words of their own."
)
if len(groups) == tr.n_tokens and len(key_groups) == tr.n_keys:
    notice.info(
        "No word of this sentence is cut into pieces, so the two heatmaps below are the same. Try a sentence with a "
        "rare or long word, e.g. *Tokenizers split unbelievably rare words.*",
        icon=":material/info:",
    )
# one above the other at full width: side by side (half width) each labelled only every other word, and the long
# merged words this page exists to show were the ones left without a label
ui.chart(drawn["words_head"], "words", f"layer{layer}", f"head{head}", view)
st.caption("Row: a word looking (mean of its pieces' rows). Column: a word looked at (sum of its pieces).")
ui.chart(drawn["tokens_head"], "tokens", f"layer{layer}", f"head{head}", view)
st.caption("The same head between the tokens the model really saw.")
if drawn.word_boundary is not None:
    st.caption(f"Dashed red lines: where sentence A ends (after word {drawn.word_boundary - 1}, token {boundary - 1}).")
ui.provenance(tr)
