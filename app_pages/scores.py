"""Score functions: dot, scaled dot, general and additive attention side by side. Layout only."""

import streamlit as st

from attnviz import ui
from attnviz.analysis import scores as S
from attnviz.plots import scores as sp

st.title("Score functions")
st.markdown(
    "Every attention layer turns a query and a key into one number, the **score**, then takes a softmax over the "
    "keys. The general attention model lets the score function vary: **dot** `q·k`, **scaled dot** `q·k/√d` "
    "(the Transformer's), **general** `qᵀWk` (a learned bilinear form) and **additive** `vᵀtanh(W_q q + W_k k)` "
    "(a small network, Bahdanau's). Here all four run on the same random queries and keys."
)
left, right = st.columns(2)
d = left.select_slider("Vector width d", [4, 16, 64, 256, 1024], value=64, key="sc_d")
seed = right.number_input("Seed", 0, 10_000, 0, key="sc_seed")
q, k = S.seeded_queries_keys(12, d, seed)
results = S.ScoreModule.seeded(d, seed=int(seed)).all(q, k)

st.subheader("Score distributions", divider="gray")
st.plotly_chart(sp.score_histograms(results), config=ui.chart_config("scores", f"d{d}"))
st.subheader("Their softmax weights", divider="gray")
st.caption("12 queries (rows) over 12 keys (columns); every row sums to 1.")
st.plotly_chart(sp.weights_side_by_side(results), config=ui.chart_config("score_weights", f"d{d}"))

st.subheader("Why scaling matters for dot products and not for additive scores", divider="gray")
dims = (4, 16, 64, 256, 1024)
st.plotly_chart(sp.spread_lines(dims, S.spread_by_width(dims, seed=int(seed))), config=ui.chart_config("spread"))
st.markdown(
    "A dot product of unit-variance vectors sums d products, so its spread grows like √d (the dot and general "
    "lines climb): at large d one key's score dwarfs the rest and the softmax turns into a one-hot choice whose "
    "gradient vanishes. Dividing by √d keeps the spread near 1 at every width. The additive score passes through "
    "tanh, which bounds every hidden unit to (-1, 1), so |score| ≤ Σ|v| whatever d is: its line stays flat and it "
    "needs no scaling (its price is an extra hidden layer per query-key pair, where dot products are one matrix "
    "multiplication)."
)
