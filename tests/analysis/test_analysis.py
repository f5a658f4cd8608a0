"""attnviz.analysis: the numbers behind the Scaling and Masks pages (pure numpy, plus a few real traces)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import attnviz
from attnviz.analysis import masks, scaling, stats
from attnviz.attention import stages_from_scores
from attnviz.plots import distributions

TEXT = "The cat sat on the mat because it was tired."


def synthetic_trace(n_layer=2, n_head=3, T=5, d_head=16, seed=0, mask=None) -> attnviz.AttentionTrace:
    """A trace whose stages come from the package's own math on random scores."""
    rng = np.random.default_rng(seed)
    scores = rng.normal(0, math.sqrt(d_head), (n_layer, n_head, T, T)).astype(np.float32)
    scale = 1 / math.sqrt(d_head)
    mask = np.ones((n_layer, T, T), bool) if mask is None else mask
    weights = np.stack(
        [
            stages_from_scores(torch.from_numpy(scores[i]), scale, torch.from_numpy(mask[i]), -1e9).weights.numpy()
            for i in range(n_layer)
        ]
    )
    trace = attnviz.AttentionTrace.from_scores([f"t{i}" for i in range(T)], scores, scale, mask, -1e9, d_head=d_head)
    np.testing.assert_allclose(trace.weights, weights, atol=1e-7)  # the record derives what the math gives
    return trace


# --- histograms and reference curves ---------------------------------------------------------------------------


def test_histogram_counts_every_finite_value_and_nothing_else():
    values = np.array([[1.0, 2.0, np.inf], [-np.inf, np.nan, 3.0], [-3.4e38, 0.5, 0.25]])
    finite = values[np.isfinite(values)]
    h = stats.histogram(values, bins=7)
    assert h.counts.sum() == h.n == finite.size
    assert h.edges.size == 8 and h.counts.size == 7
    assert h.mean == pytest.approx(finite.mean()) and h.var == pytest.approx(finite.var())


def test_histogram_of_nothing_finite_and_of_a_constant():
    empty = stats.histogram(np.full(4, -np.inf), bins=5)
    assert empty.n == 0 and empty.counts.sum() == 0 and math.isnan(empty.var)
    const = stats.histogram(np.full(10, 2.0), bins=4)
    assert const.counts.sum() == 10 and const.edges[0] < 2.0 < const.edges[-1]


def test_normal_curve_is_in_counts_per_bin():
    rng = np.random.default_rng(1)
    h = stats.histogram(rng.normal(0, 3, 20000), bins=50)
    x, y = stats.normal_curve(h, var=9.0)
    area = np.trapezoid(y, x) / h.width  # expected counts summed over bins
    assert area == pytest.approx(h.n, rel=0.02)
    # it follows the bars: expected count at the centre bin is close to the observed one
    centre = np.argmin(np.abs(h.centers))
    assert np.interp(h.centers[centre], x, y) == pytest.approx(h.counts[centre], rel=0.1)


def test_row_max_and_entropy_at_the_extremes():
    uniform, onehot, dead = np.full(8, 1 / 8), np.eye(8)[2], np.zeros(8)
    w = np.stack([uniform, onehot, dead])
    assert stats.row_max(w).tolist() == pytest.approx([1 / 8, 1.0, 0.0])
    assert stats.row_entropy(w).tolist() == pytest.approx([math.log(8), 0.0, 0.0])


# --- the divisor what-if --------------------------------------------------------------------------------------


def test_scale_stops_run_from_1_through_1_over_sqrt_d_to_1_over_d():
    stops = scaling.scale_stops(32, model=1 / math.sqrt(32))
    assert stops[0] == 1 and stops[-1] == pytest.approx(1 / 32) and stops == sorted(stops, reverse=True)
    assert len(stops) == len(set(stops))
    labels = [scaling.scale_label(x, 32, 1 / math.sqrt(32)) for x in stops]
    assert labels == ["1", "1/2", "1/4", "1/√32 ≈ 0.177 (the model's)", "1/8", "1/16", "1/32"]
    # a model that does not scale by 1/sqrt(d) gets its own, marked stop
    t5 = scaling.scale_stops(64, model=1.0)
    assert t5[0] == 1.0 and 1 / 8 in t5
    assert scaling.scale_label(0.27, 16, 0.27) == "0.27 (the model's)"


def test_compare_scale_reproduces_the_model_and_the_variance_law():
    tr = synthetic_trace()
    own = scaling.model_scale(tr, 1)
    assert own == pytest.approx(0.25)
    cmp = scaling.compare_scale(tr, 1, own)  # all heads
    assert cmp.heads == (0, 1, 2) and cmp.rescaled_weights.shape == (3, 5, 5)
    np.testing.assert_allclose(cmp.rescaled_weights, tr.weights[1], atol=1e-6)
    # multiplying by s multiplies the variance by s^2 (numpy's own variance of the raw scores, times s^2)
    assert cmp.hist_scaled.var == pytest.approx(np.var(tr.scores[1].astype(np.float64)) * own**2, rel=1e-4)
    assert cmp.hist_scores.n == cmp.hist_scaled.n == 3 * 5 * 5
    one = scaling.compare_scale(tr, 1, 1.0, head=2)
    assert one.heads == (2,)
    np.testing.assert_allclose(one.rescaled_weights, one.raw_weights, atol=1e-7)
    # unscaled rows are more peaked than scaled ones
    assert cmp.max_raw.mean() > cmp.max_rescaled.mean() and cmp.entropy_raw.mean() < cmp.entropy_rescaled.mean()


def test_law_rows_reproduce_the_seed_numbers():
    rows = scaling.law_rows()
    assert [r.d for r in rows] == [2, 4, 8, 16, 32, 64, 128, 256, 512, 1024]
    for r in rows:
        assert r.var_scores == pytest.approx(r.d, rel=0.2)  # Var(q.k) = d
        assert r.var_scaled == pytest.approx(1.0, rel=0.2)  # Var(q.k / sqrt d) = 1
    first, last = rows[0], rows[-1]
    assert last.max_weight_scores > 0.9 and last.entropy_scores < 0.3  # unscaled: saturated
    assert abs(last.max_weight_scaled - first.max_weight_scaled) < 0.1  # scaled: unchanged with d
    assert scaling.law_rows() is rows  # cached: the same for every sentence


# --- masks ----------------------------------------------------------------------------------------------------


def test_mask_options_and_their_unmasked_twin():
    opts = masks.mask_options(
        single_layer=False, pad_to=20, pad_mask=True, causal=True, hide=[3, 1], layers=(2,), fill=-math.inf
    )
    assert opts == dict(causal=True, hide=(1, 3), fill=-math.inf, pad_to=20, pad_mask=True, layers=(2,))
    off = masks.unmasked_options(opts)
    assert off == dict(causal=False, hide=(), fill=None, pad_to=20, pad_mask=False, layers=(2,))
    own = masks.model_options(dict(opts, pad_mask=False))  # the model as it is: its padding mask, no experiment
    assert own == dict(causal=False, hide=(), fill=None, pad_to=20, pad_mask=True, layers=None)
    module = masks.mask_options(
        single_layer=True, pad_to=20, pad_mask=False, causal=False, hide=(), layers=(0,), fill=-10000.0
    )
    assert module == dict(causal=False, hide=(), fill=-10000.0)
    assert masks.model_options(module) == dict(causal=False, hide=(), fill=None)
    assert (
        masks.mask_options(single_layer=False, pad_to=0, pad_mask=True, causal=False, hide=(), layers=None, fill=-1e9)[
            "pad_to"
        ]
        is None
    )


def test_forbidden_cells_of_cross_attention_match_the_seam_causal_mask_and_hide_keys():
    from attnviz.attention import causal_mask

    for n_q, n_k in ((3, 5), (5, 3)):  # queries and keys from two texts (cross-attention)
        f = masks.forbidden_cells(n_q, n_q, causal=True, hide=[1], n_keys=n_k, n_real_keys=n_k)
        expected = ~causal_mask(n_q, n_k).numpy()
        expected[:, 1] = True
        assert f.shape == (n_q, n_k) and (f == expected).all()
    assert not masks.forbidden_cells(2, 2, n_keys=6, n_real_keys=6).any()  # no key beyond the queries is padding


def test_forbidden_cells():
    f = masks.forbidden_cells(5, 4, causal=True, hide=[1])
    assert f[:, 4].all() and f[:, 1].all()  # padding and hidden columns
    assert f[0, 2] and not f[2, 0] and not f[3, 3]  # the future is forbidden, the past is not
    assert not masks.forbidden_cells(3, 3).any()


def test_leak_is_zero_with_the_padding_mask_and_positive_without(bundled):
    n_real = attnviz.trace(bundled, TEXT).n_tokens
    masked = attnviz.trace(bundled, TEXT, pad_to=n_real + 5, pad_mask=True)
    open_ = attnviz.trace(bundled, TEXT, pad_to=n_real + 5, pad_mask=False)
    forbidden = masks.forbidden_cells(masked.n_tokens, n_real)
    for layer in range(masked.n_layer):
        assert masks.leaked(masked.layer(layer).weights, forbidden, n_real) == 0
        assert masks.leaked(open_.layer(layer).weights, forbidden, n_real) > 0.01


def test_leak_counts_only_real_queries():
    w = np.zeros((1, 3, 3))
    w[0, :, 0] = 1.0  # every query on key 0
    w[0, 2] = [0, 0, 1]  # the padding query attends the padding key: not a leak of a real query
    assert masks.leaked(w, masks.forbidden_cells(3, 2), n_real=2) == 0.0
    w[0, 1] = [0.5, 0, 0.5]  # a real query puts half its weight on the padding key
    assert masks.leaked(w, masks.forbidden_cells(3, 2), n_real=2) == pytest.approx(0.25)


def test_a_forward_pass_mask_reaches_later_layers_only(bundled):
    without = attnviz.trace(bundled, TEXT, layers=(2,))
    with_mask = attnviz.trace(bundled, TEXT, causal=True, layers=(2,))
    own = attnviz.trace(bundled, TEXT)
    rep = masks.mask_report(with_mask, without, own, 2, 0, n_real=with_mask.n_tokens, causal=True, hide=())
    assert rep.change[:2].tolist() == [0.0, 0.0]  # layers before the mask are untouched
    assert (rep.change[2:] > 0).all()  # the masked layer and every later one changed
    assert rep.leak_with[2] == 0 and rep.leak_without[2] > 0  # no look-ahead where the mask holds
    assert rep.leak_with[3] > 0  # layer 3 was not masked: it still looks ahead


def test_the_report_read_in_blocks_of_query_rows_equals_whole_layers(tiny_bert, tiny_text, monkeypatch):
    """The report measures a few query rows at a time (the float64 arithmetic stays small); blocks that end inside
    the real queries and inside the padding give what whole layers give."""
    n_real = len(tiny_bert.tokenizer(tiny_text)["input_ids"])
    pad = dict(pad_to=n_real + 5)
    with_mask = attnviz.trace(tiny_bert, tiny_text, causal=True, hide=(2,), **pad)
    without = attnviz.trace(tiny_bert, tiny_text, pad_mask=False, **pad)
    own = attnviz.trace(tiny_bert, tiny_text, **pad)
    assert with_mask.n_tokens == n_real + 5 and (n_real % 4, (n_real + 5) % 4) != (0, 0)
    monkeypatch.setattr(masks, "REPORT_CELLS", 4 * with_mask.n_head * with_mask.n_keys)  # 4 rows a block
    rep = masks.mask_report(with_mask, without, own, 1, 0, n_real, True, (2,))
    base = masks.forbidden_cells(with_mask.n_tokens, n_real, True, (2,))
    for i in range(with_mask.n_layer):  # numpy over whole layers, in float64
        forbidden = base | ~own.layer_mask(i)
        w, wo, m = (np.asarray(t.layer(i).weights, np.float64) for t in (with_mask, without, own))
        expected = [(x[:, :n_real] * forbidden[:n_real]).sum(-1).mean() for x in (w, wo)]
        # float32 rounding apart (a block's q.k^T is its own matrix product), the same
        assert [rep.leak_with[i], rep.leak_without[i]] == pytest.approx(expected, rel=1e-6, abs=1e-9)
        assert rep.change[i] == pytest.approx(np.abs(w - m).max(), rel=1e-5, abs=1e-7)
    assert rep.leak_without.max() > 0.01 and rep.leak_with.max() == 0  # the test can tell a leak from none


def test_fill_demo_zero_row_for_minus_inf_and_uniform_for_finite_fills():
    row = np.array([3.0, -1.0, 0.5, 2.0, -2.0], np.float32)
    visible = np.array([True, True, False, True, False])
    demo = {r.fill: r for r in masks.fill_demo(row, visible)}
    assert set(demo) == {"float32 min", "-10000", "-1e9", "-inf"}
    assert (demo["-inf"].every_masked == 0).all()
    for fill in ("float32 min", "-10000", "-1e9"):  # every finite fill, the model's float32 min included
        np.testing.assert_allclose(demo[fill].every_masked, 1 / 5)
    for r in demo.values():  # a partially masked row: the same weights whatever the fill
        np.testing.assert_array_equal(r.some_masked, demo["-inf"].some_masked)
        assert r.some_masked[~visible].tolist() == [0.0, 0.0] and r.some_masked.sum() == pytest.approx(1.0)


def test_demo_row_picks_the_widest_partial_row():
    causal = np.tril(np.ones((4, 4), bool))
    q, visible = masks.demo_row(causal, n_real=4)
    assert q == 2 and visible.tolist() == [True, True, True, False]
    q, visible = masks.demo_row(np.ones((4, 4), bool), n_real=4)  # nothing masked: a made-up half row
    assert q == 0 and visible.tolist() == [True, True, False, False]


def test_dead_rows_are_reported(bundled):
    tr = attnviz.trace(bundled, TEXT, causal=True, hide=(0,), fill=-math.inf, layers=(0,))
    base = attnviz.trace(bundled, TEXT, layers=(0,))
    rep = masks.mask_report(tr, base, base, 0, 0, tr.n_tokens, causal=True, hide=(0,))
    assert rep.dead_rows == (masks.DeadRow(0, 0.0, 0.0),)
    assert (tr.weights[0, :, 0] == 0).all()  # -inf: the fully masked query attends to nothing
    finite = attnviz.trace(bundled, TEXT, causal=True, hide=(0,), fill=-1e4, layers=(0,))
    (dead,) = masks.mask_report(finite, base, base, 0, 3, tr.n_tokens, causal=True, hide=(0,)).dead_rows
    n = tr.n_tokens  # a finite fill: a uniform row, all but key 0 (the hidden one) in query 0's future
    assert dead.total == pytest.approx(1.0) and dead.future == pytest.approx((n - 1) / n)


def test_select_all_is_refused_and_the_model_mask_is_named(bundled, tiny_gpt2):
    assert masks.hides_everything(range(5), 5) and not masks.hides_everything([0, 1, 2, 3], 5)
    assert not masks.hides_everything([], 0) and not masks.hides_everything([7], 1)  # out of range counts as nothing
    n = attnviz.trace(bundled, TEXT).n_tokens
    assert masks.own_mask_words(attnviz.trace(bundled, TEXT), 0) == "none, every key visible"
    assert masks.own_mask_words(attnviz.trace(bundled, TEXT, pad_to=n + 2), 0) == "its padding mask"
    gpt2 = attnviz.trace(tiny_gpt2, "the cat sat", pad_to=6)
    assert masks.own_mask_words(gpt2, 1) == "its causal mask and its padding mask"


# --- figures are built from these numbers ---------------------------------------------------------------------


def test_figures_name_themselves_and_use_float32():
    tr = synthetic_trace()
    cmp = scaling.compare_scale(tr, 0, 0.25, head=0)
    figs = [
        distributions.score_histograms(cmp, 16, "1/4"),
        distributions.softmax_pair(cmp, tr.tokens, "head 0", "1/4"),
        distributions.row_saturation(cmp, tr.tokens, "1/4"),
        distributions.law_figure(list(scaling.law_rows()), 16),
    ]
    assert [f.layout.meta["figure"] for f in figs] == [
        "score_histograms",
        "softmax_pair",
        "row_saturation",
        "sqrt_d_law",
    ]
    heat = figs[1].data[1]
    assert heat.z.dtype == np.float32
    assert (
        figs[1].layout.coloraxis.cmin == 0
        and figs[1].layout.coloraxis.cmax == 1
        and figs[1].layout.coloraxis.colorscale
    )


def test_token_labels_in_figures_are_escaped():
    tr = synthetic_trace(T=3)
    tokens = ["<b>x</b>", "<a href='javascript:alert(1)'>y</a>", "z"]
    cmp = scaling.compare_scale(tr, 0, 0.25, head=0)
    fig = distributions.softmax_pair(cmp, tokens, "head 0", "1/4")
    text = fig.to_json()
    assert "<b>x</b>" not in text and "<a href" not in text and "&lt;b&gt;" in text


def test_reach_note_says_which_layers_changed():
    assert "layer 2 only" in masks.reach_note((2,), 2, 6) and "layers 3..5" in masks.reach_note((2,), 2, 6)
    assert "changed too" not in masks.reach_note((5,), 5, 6)
    assert "every layer" in masks.reach_note(None, 0, 6)
    assert "module" in masks.reach_note(None, 0, 1, single_layer=True)
    assert "Every other layer keeps the model's own mask (its padding mask)." in masks.reach_note(
        (2,), 2, 6, kept="its padding mask"
    )
    assert "No experiment" in masks.reach_note((2,), 2, 6, kept="its causal mask", changed=False)


# --- pooling for the overview ---------------------------------------------------------------------------------


def test_pooling_averages_blocks_and_keeps_weight_rows_distributions():
    from attnviz.analysis.pooling import pool

    x = np.arange(36, dtype=np.float64).reshape(1, 6, 6)
    means = pool(torch.from_numpy(x), 3).numpy()[0]
    expected = x[0].reshape(3, 2, 3, 2).mean(axis=(1, 3))  # 2 x 2 blocks by hand
    np.testing.assert_allclose(means, expected, rtol=1e-6)
    w = np.full((1, 6, 6), 1 / 6)
    rows = pool(torch.from_numpy(w), 3, sum_keys=True).numpy()[0]
    np.testing.assert_allclose(rows.sum(-1), 1, rtol=1e-6)  # still a distribution over key blocks
    x[0, 0, 0] = np.nan  # a masked cell is left out of its block's mean
    assert pool(torch.from_numpy(x), 3).numpy()[0, 0, 0] == pytest.approx((1 + 6 + 7) / 3)


def test_pooled_stage_matches_pooling_each_full_layer(bundled):
    from attnviz.analysis.pooling import pooled_stage

    tr = attnviz.trace(bundled, "word " * 60)
    pooled = pooled_stage(tr, "scores", 8)
    assert pooled.shape == (tr.n_layer, tr.n_head, 8, 8)
    s = tr.layer(3).scores.astype(np.float64)
    edges = np.linspace(0, tr.n_tokens, 9).round().astype(int)
    by_hand = np.array([[s[:, a:b, c:d].mean(axis=(1, 2)) for c, d in zip(edges[:-1], edges[1:])]
                        for a, b in zip(edges[:-1], edges[1:])])  # fmt: skip  # [8, 8, head]
    np.testing.assert_allclose(pooled[3], by_hand.transpose(2, 0, 1), rtol=1e-4, atol=1e-4)
