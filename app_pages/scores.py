"""Score functions: dot, scaled dot, general and additive attention side by side, on random vectors and inside
our module on the sentence. Layout only."""

import streamlit as st

from attnviz import ui
from attnviz.analysis import scores as S
from attnviz.plots import heatmaps as hm
from attnviz.plots import scores as sp

src = ui.current()
st.title("Score functions")
st.markdown(
    "Every attention layer turns a query and a key into one number, the **score**, then takes a softmax over the "
    "keys. The general attention model lets the score function vary: **dot** `q·k`, **scaled dot** `q·k/√d` "
    "(the Transformer's), **general** `qᵀWk` (a learned bilinear form) and **additive** `vᵀtanh(W_q q + W_k k)` "
    "(a small network, Bahdanau's). The first tab runs all four inside our module on your sentence, the second on "
    "random vectors of any width, where it also shows why dot products need the scale and additive scores do not."
)

sentence, vectors = st.tabs(["Your sentence", "Random vectors"], key="sc_tab", bind=ui.URL)
# Only the open tab runs and draws (a tab with state is lazy): a visit draws two charts or three, not five.
if sentence.open:
    with sentence:
        sources = ui.score_sources(src)
        one = ui.get_trace(sources["scaled_dot"])  # every score function scores the same q and k: this run's
        if one is None:
            st.stop()
        module = sources["scaled_dot"].module_source()
        d_head = one.d_head
        st.caption(
            f"Our module, `{module.describe()}`, with `score=` set to each function: the same projections, so the same "
            "queries and keys, every time; general and additive add their own seeded parameters. "
            + ("Change it in the sidebar." if src.single_layer else "Choose **Our module** as the source to change it.")
        )
        head = ui.head_picker(sources["scaled_dot"])
        above = st.container()  # the histograms go above the token window that the weights chart draws
        span = ui.token_window(one, hm.MAX_SHOWN)
        drawn = S.head_window(one, module, head, sp.drawn_window(one.n_tokens, one.n_keys, span))
        summary = S.head_summary(one, module, head)
        results = {name: (summary.histograms[name], drawn[name]) for name in S.SCORE_FUNCTIONS}
        with above:
            ui.chart(
                sp.score_histograms(results, what="softmax input", figure="module_softmax_inputs"),
                "scores",
                "module",
                f"head{head}",
            )
            n_q, n_k = summary.shape
            st.caption(
                f"What each score function hands the softmax, for every query-key pair of head {head} ({n_q:,} × {n_k:,}): "
                f"its scores times the scale it applies (1/√d_head only for scaled dot; d_head = {d_head} here)."
            )
        ui.chart(
            sp.weights_side_by_side(
                results, one.tokens, one.key_tokens, "module_score_weights", span, summary.shape, top=None
            ),
            "score_weights",
            "module",
            f"head{head}",
        )
        st.caption(
            "Their softmax weights, on one colour scale from 0 to the largest weight drawn (the bar on the right): each row "
            f"spreads one unit of weight over {n_k:,} keys, so at long texts every weight is small; the table says how peaked "
            "the rows are over every key."
        )
        sharp = summary.sharpness
        rows = [{**r, "score function": sp.LABELS[r["score function"]]} for r in sharp]
        st.dataframe(
            rows,
            hide_index=True,
            key="sc_sharpness",
            column_config={
                k: st.column_config.NumberColumn(k, format="%.3f") for k in rows[0] if k != "score function"
            },
        )
        by = {r["score function"]: r for r in sharp}
        st.markdown(
            f"**Why scaling matters here.** dot and scaled dot compute the same q·k; scaled dot multiplies it by "
            f"1/√{d_head} before the softmax. Unscaled, the softmax inputs spread {by['dot']['std of softmax input']:.3g} "
            f"instead of {by['scaled_dot']['std of softmax input']:.3g}, and each row's largest weight averages "
            f"{by['dot']['mean largest weight']:.3g} instead of {by['scaled_dot']['mean largest weight']:.3g}: the rows "
            "are closer to a one-hot choice, whose gradient vanishes. The additive score needs no scale: its tanh keeps "
            "every hidden unit in (-1, 1), so its scores stay bounded however wide the vectors are."
        )
        ui.provenance(one)
if vectors.open:
    with vectors:
        left, right = ui.columns("random", 2)
        d = left.select_slider("Vector width d", [4, 16, 64, 256, 1024], value=64, key="sc_d", bind=ui.URL)
        seed = right.number_input("Seed", 0, 10_000, 0, key="sc_seed", bind=ui.URL)
        q, k = S.seeded_queries_keys(12, d, seed)
        results = S.ScoreModule.seeded(d, seed=int(seed)).all(q, k)
        st.markdown("**Score distributions** of 12 random queries against 12 random keys (entries of variance 1).")
        ui.chart(sp.score_histograms(results), "scores", f"d{d}")
        st.markdown("**Their softmax weights**: 12 queries (rows) over 12 keys (columns); every row sums to 1.")
        ui.chart(sp.weights_side_by_side(results), "score_weights", f"d{d}")
        st.markdown("**Why scaling matters for dot products and not for additive scores**")
        dims = (4, 16, 64, 256, 1024)
        ui.chart(sp.spread_lines(dims, S.spread_by_width(dims, seed=int(seed))), "spread")
        st.markdown(
            "A dot product of unit-variance vectors sums d products, so its spread grows like √d (the dot and general "
            "lines climb): at large d one key's score dwarfs the rest and the softmax turns into a one-hot choice whose "
            "gradient vanishes. Dividing by √d keeps the spread near 1 at every width. The additive score passes through "
            "tanh, which bounds every hidden unit to (-1, 1), so |score| ≤ Σ|v| whatever d is: its line stays flat and it "
            "needs no scaling (its price is an extra hidden layer per query-key pair, where dot products are one matrix "
            "multiplication)."
        )
