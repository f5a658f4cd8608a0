"""Why 1/sqrt(d_k): the spread of the scores, what the softmax does with it, and the random-vector law."""

import streamlit as st

from attnviz import figures, ui
from attnviz.analysis import scaling
from attnviz.plots import distributions as dp
from attnviz.plots import heatmaps as hm


def show(drawn, name: str, why: str, key: str) -> None:
    ui.section(drawn[name], drawn.title(name), why, key, "scaling", src.model.name, f"layer{src.layer}")


src = ui.current()
st.title("Why scale the scores by 1/√d_k?")
st.caption(
    "Attention computes softmax(q·kᵀ × scale) with scale = 1/√d_k. This page shows what the scale does to one "
    "layer of the model."
)
tr = ui.get_trace(src)
if tr is not None and not tr.has("scores"):
    st.info(f"There are no raw scores to rescale here. {tr.why_not('scores')} The law below still holds.")
elif tr is not None:
    layer, d = src.trace_layer, tr.d_head
    own = scaling.model_scale(tr, layer)
    c1, c2, c3 = ui.columns("scaling", [1, 2, 3])
    all_heads = c1.toggle(
        "All heads", key="all_heads", bind=ui.URL, help="Pool the heads of this layer instead of one."
    )
    head = ui.head_picker(src, c2, disabled=all_heads)
    label = lambda x: scaling.scale_label(x, d, own)  # noqa: E731
    scale = ui.url_choice(
        c3.select_slider,
        "Multiply the scores by",
        {s: label(s) for s in scaling.scale_stops(d, own)},
        default=round(own, 8),
        key="scale",
        help="The scale: 1/√d_k is what the model uses. Multiplying by 1/√d_k divides by √d_k.",
    )
    who = f"mean of {tr.n_head} heads" if all_heads else f"head {head}"
    text = scaling.scale_label(scale, d)
    st.caption(
        f"Layer {src.layer}, {'all heads' if all_heads else who}, d_k = {d}. The model's scale is {label(own)}. "
        f"**What-if:** the scale is applied to this layer's stored scores (`trace.recompute`); no new forward pass, "
        "so later layers still see the model's own weights."
    )
    first = st.container()  # chart 1 goes above the token window that chart 2 draws
    drawn = figures.scaling(tr, layer, head, scale, all_heads, ui.token_window(tr, hm.MAX_SHOWN, keys=False))
    cmp = drawn.compared
    with first:
        show(
            drawn,
            "score_histograms",
            f"Multiplying by {text} multiplies the variance by its square, {scale**2:,.4g}: "
            f"**{cmp.hist_scores.var:.1f} → {cmp.hist_scaled.var:.2f}**. The solid curve is a normal curve with the "
            f"measured variance; the dotted one is the textbook case of q and k entries with variance 1: N(0, d = {d}) "
            f"before, N(0, 1) after multiplying by 1/√{d}. Real q and k are not unit-variance, so the spreads differ, "
            "but the scale shrinks either by the same factor.",
            "hist",
        )
    show(
        drawn,
        "softmax_pair",
        "Each row is one query's attention over the keys (rows sum to 1). Without the division the largest score "
        "takes almost everything: rows turn into a single bright cell.",
        "softmax",
    )
    show(
        drawn,
        "row_saturation",
        "A largest weight near 1 and an entropy near 0 mean a one-hot row: there the softmax is flat, its gradients "
        "vanish and the layer stops learning. Scaling keeps the rows spread out."
        + (" Each point is the mean over the heads." if all_heads else "")
        + (f" {note}" if (note := dp.row_saturation_note(tr.n_tokens)) else ""),
        "rows",
    )
if tr is None or not tr.has("scores"):
    drawn = figures.Drawn((figures.law(tr.d_head if tr is not None else None),))
show(
    drawn,
    "sqrt_d_law",
    "If q and k have independent entries of mean 0 and variance 1, q·k is a **sum of d products, each of variance 1**, "
    "so **Var(q·k) = d** (left: the measured points lie on the grey band y = d). Multiplying by 1/√d brings the "
    "variance back to **1** for every d. Unscaled, the softmax input spreads like √d: the largest weight climbs to 1 and the "
    "entropy falls to 0, i.e. the softmax saturates and its gradients vanish. 1000 random queries × 64 keys per d, seed 0.",
    "law",
)
if tr is not None:
    ui.provenance(tr)
