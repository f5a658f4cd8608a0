"""The stage math (scores -> scaled -> masked -> weights) and the experiments that change a forward pass.

Experiments run on the bundled model: padding with/without its mask, forced causality, hidden tokens,
per-layer application, scale override, fill values, fully masked rows and `AttentionTrace.recompute`.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import attnviz
from attnviz import causal_mask, softmax, stages_from_scores, valid_length_mask
from attnviz.analysis.masks import COMMON_FILLS

TEXT = "The cat sat on the mat because it was tired."
FILL_VALUES = [COMMON_FILLS["-10000"], COMMON_FILLS["-1e9"], COMMON_FILLS["-inf"]]
FILL_IDS = ["-10000", "-1e9", "-inf"]


def entropy(weights: np.ndarray) -> float:
    """Mean row entropy in nats."""
    p = weights.astype(np.float64)
    return float(-(p * np.log(np.where(p > 0, p, 1.0))).sum(-1).mean())


@pytest.fixture(scope="module")
def plain(bundled):
    return attnviz.trace(bundled, TEXT)


# --- the math ----------------------------------------------------------------------------------------


def test_fills_are_the_documented_values():
    assert COMMON_FILLS["-10000"] == -10000.0 and COMMON_FILLS["-1e9"] == -1e9 and COMMON_FILLS["-inf"] == float("-inf")
    assert COMMON_FILLS["float32 min"] == torch.finfo(torch.float32).min


def test_softmax_matches_torch_on_ordinary_rows():
    x = torch.randn(3, 5, 7, generator=torch.Generator().manual_seed(0))
    torch.testing.assert_close(softmax(x), torch.softmax(x, -1), rtol=0, atol=0)


def test_softmax_of_an_all_minus_inf_row_is_zero_not_nan():
    x = torch.tensor([[float("-inf")] * 4, [0.0, float("-inf"), 1.0, float("-inf")]])
    w = softmax(x)
    assert not torch.isnan(w).any()
    assert (w[0] == 0).all()
    assert w[1, 1] == 0 and w[1, 3] == 0 and torch.isclose(w[1].sum(), torch.tensor(1.0))


@pytest.mark.parametrize(
    "fill", [COMMON_FILLS["-10000"], COMMON_FILLS["-1e9"], COMMON_FILLS["float32 min"]], ids=["-10000", "-1e9", "min"]
)
def test_softmax_of_a_fully_masked_row_with_finite_fill_is_uniform(fill):
    w = softmax(torch.full((2, 6), fill))
    torch.testing.assert_close(w, torch.full((2, 6), 1 / 6))


def test_stages_are_defined_one_from_the_other():
    g = torch.Generator().manual_seed(1)
    scores = torch.randn(2, 3, 4, 4, generator=g)
    mask = torch.rand(4, 4, generator=g) > 0.3
    st = stages_from_scores(scores, 0.25, mask, fill=-1e9)
    torch.testing.assert_close(st.scaled, scores * 0.25, rtol=0, atol=0)
    assert (st.masked[..., ~mask] == -1e9).all()
    torch.testing.assert_close(st.masked[..., mask], st.scaled[..., mask], rtol=0, atol=0)
    torch.testing.assert_close(st.weights, softmax(st.masked), rtol=0, atol=0)


@pytest.mark.parametrize("fill", FILL_VALUES, ids=FILL_IDS)
def test_masked_cells_get_exactly_zero_weight(fill):
    g = torch.Generator().manual_seed(2)
    scores = torch.randn(2, 5, 5, generator=g) * 3
    mask = causal_mask(5)
    w = stages_from_scores(scores, 1.0, mask, fill).weights
    assert (w[:, ~mask] == 0).all()
    torch.testing.assert_close(w.sum(-1), torch.ones(2, 5))


def test_bias_joins_the_scaled_stage():
    scores, bias = torch.ones(1, 2, 2), torch.tensor([[[0.0, 1.0], [2.0, 3.0]]])
    st = stages_from_scores(scores, 0.5, None, bias=bias)
    torch.testing.assert_close(st.scaled, scores * 0.5 + bias)


def test_causal_mask_is_lower_triangular_and_aligned_to_the_end():
    assert torch.equal(causal_mask(3), torch.tensor([[1, 0, 0], [1, 1, 0], [1, 1, 1]], dtype=torch.bool))
    rect = causal_mask(2, 4)  # two new queries after two cached keys
    assert torch.equal(rect, torch.tensor([[1, 1, 1, 0], [1, 1, 1, 1]], dtype=torch.bool))


def test_valid_length_mask_1d_and_2d():
    m = valid_length_mask(torch.tensor([3, 1]), 2, 4)
    assert m.shape == (2, 1, 2, 4)
    assert m[0, 0].tolist() == [[True, True, True, False]] * 2
    assert m[1, 0].tolist() == [[True, False, False, False]] * 2
    m2 = valid_length_mask(torch.tensor([[1, 2], [4, 0]]), 2, 4)
    assert m2[0, 0].tolist() == [[True, False, False, False], [True, True, False, False]]
    assert m2[1, 0].tolist() == [[True] * 4, [False] * 4]


def test_valid_length_mask_rejects_wrong_per_query_lengths():
    with pytest.raises(attnviz.AttnvizError, match="one per query"):
        valid_length_mask(torch.tensor([[1, 2, 3]]), 2, 4)


# --- padding ---------------------------------------------------------------------------------------------


def test_padding_with_its_mask_gets_exactly_zero_weight(bundled, plain):
    n = plain.n_tokens
    tr = attnviz.trace(bundled, TEXT, pad_to=n + 4, pad_mask=True)
    assert tr.n_tokens == n + 4 and tr.tokens[n:] == ("[PAD]",) * 4
    assert (tr.weights[..., n:] == 0).all()
    assert not tr.mask[:, :, n:].any()
    # the real tokens see what they see without padding (up to float32 noise of longer matmuls)
    np.testing.assert_allclose(tr.weights[:, :, :n, :n], plain.weights, rtol=0, atol=1e-5)


def test_padding_without_its_mask_soaks_up_attention(bundled):
    n = attnviz.trace(bundled, TEXT).n_tokens
    masked = attnviz.trace(bundled, TEXT, pad_to=n + 4, pad_mask=True)
    open_ = attnviz.trace(bundled, TEXT, pad_to=n + 4, pad_mask=False)
    assert (open_.weights[..., n:] > 0).all()
    assert open_.mask.all()
    # the pads change what real tokens attend to, in layer 0 and (through the hidden states) after
    for layer in range(bundled.n_layer):
        assert not np.allclose(open_.weights[layer, :, :n, :n], masked.weights[layer, :, :n, :n], atol=1e-4)
    assert not np.allclose(open_.scores[1:, :, :n, :n], masked.scores[1:, :, :n, :n], atol=1e-3)


def test_dropping_the_padding_mask_in_one_layer_keeps_it_in_the_others(bundled, plain):
    n = plain.n_tokens
    masked = attnviz.trace(bundled, TEXT, pad_to=n + 4)
    tr = attnviz.trace(bundled, TEXT, pad_to=n + 4, pad_mask=False, layers=[1])
    np.testing.assert_array_equal(tr.weights[0], masked.weights[0])
    assert (tr.weights[0, ..., n:] == 0).all()
    assert (tr.weights[1, ..., n:] > 0).all() and tr.mask[1].all()
    for layer in range(2, bundled.n_layer):
        assert (tr.weights[layer, ..., n:] == 0).all() and not tr.mask[layer, :, n:].any()
        assert not np.allclose(tr.weights[layer, :, :n, :n], masked.weights[layer, :, :n, :n], atol=1e-4)


def test_pad_to_shorter_than_the_text_adds_nothing(bundled, plain):
    tr = attnviz.trace(bundled, TEXT, pad_to=3)
    assert tr.tokens == plain.tokens


# --- forced causal ------------------------------------------------------------------------------------------


def test_forced_causal_zeroes_the_upper_triangle_in_every_layer(bundled, plain):
    tr = attnviz.trace(bundled, TEXT, causal=True)
    upper = np.triu(np.ones((tr.n_tokens, tr.n_tokens), bool), k=1)
    assert (tr.weights[:, :, upper] == 0).all()
    assert not tr.mask[:, upper].any()
    np.testing.assert_allclose(tr.weights.sum(-1), 1.0, atol=1e-5)
    # query 0 can only see itself
    assert (tr.weights[:, :, 0, 0] == 1).all()


def test_forced_causal_effect_reaches_later_layers(bundled, plain):
    """Applied in layer 1 only: layer 0 is untouched, layer 1 changes and so do layers 2.. (new hidden states)."""
    tr = attnviz.trace(bundled, TEXT, causal=True, layers=[1])
    np.testing.assert_array_equal(tr.weights[0], plain.weights[0])
    np.testing.assert_array_equal(tr.scores[1], plain.scores[1])  # same inputs to layer 1...
    assert not np.allclose(tr.weights[1], plain.weights[1], atol=1e-3)  # ...but masked
    for layer in range(2, bundled.n_layer):
        assert tr.mask[layer].all()  # not masked there
        assert not np.allclose(tr.scores[layer], plain.scores[layer], atol=1e-3)
        assert not np.allclose(tr.weights[layer], plain.weights[layer], atol=1e-4)


def test_forced_causal_in_all_layers_differs_from_plain_in_every_layer(bundled, plain):
    tr = attnviz.trace(bundled, TEXT, causal=True)
    for layer in range(bundled.n_layer):
        assert not np.allclose(tr.weights[layer], plain.weights[layer], atol=1e-4)
    assert not np.allclose(tr.scores[1:], plain.scores[1:], atol=1e-3)


# --- hiding tokens ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("hidden", [[2], [0, 5]])
def test_hidden_token_columns_are_exactly_zero(bundled, hidden):
    tr = attnviz.trace(bundled, TEXT, hide=hidden)
    assert (tr.weights[..., hidden] == 0).all()
    assert not tr.mask[..., hidden].any()
    visible = [i for i in range(tr.n_tokens) if i not in hidden]
    assert (tr.weights[..., visible] > 0).all()
    np.testing.assert_allclose(tr.weights.sum(-1), 1.0, atol=1e-5)


# --- per-layer application ------------------------------------------------------------------------------


def test_experiment_on_one_layer_leaves_earlier_layers_identical(bundled, plain):
    tr = attnviz.trace(bundled, TEXT, hide=[3], layers=[2])
    for layer in (0, 1):
        np.testing.assert_array_equal(tr.weights[layer], plain.weights[layer])
        assert tr.mask[layer].all()
    assert (tr.weights[2, :, :, 3] == 0).all()
    assert (plain.weights[2, :, :, 3] > 0).all()
    for layer in range(3, bundled.n_layer):
        assert (tr.weights[layer, :, :, 3] > 0).all()  # token 3 is visible again...
        assert not np.allclose(tr.weights[layer], plain.weights[layer], atol=1e-4)  # ...but the effect propagated


def test_layers_option_is_recorded_in_options(bundled):
    tr = attnviz.trace(bundled, TEXT, causal=True, layers=[4, 2])
    assert dict(tr.options)["layers"] == (2, 4)
    assert dict(tr.options)["causal"] is True


# --- scale override ---------------------------------------------------------------------------------------


def test_scale_override_is_recorded_and_sharpens_the_weights(bundled, plain):
    tr = attnviz.trace(bundled, TEXT, scale=1.0)
    assert (tr.scale == 1.0).all()
    np.testing.assert_allclose(plain.scale, 1 / math.sqrt(32))
    np.testing.assert_array_equal(tr.scaled[0], tr.scores[0])
    assert entropy(tr.weights[0]) < entropy(plain.weights[0])
    assert entropy(tr.weights) < entropy(plain.weights)


def test_scale_override_on_some_layers_only(bundled, plain):
    tr = attnviz.trace(bundled, TEXT, scale=1.0, layers=[1, 3])
    np.testing.assert_allclose(tr.scale, [plain.scale[0], 1.0, plain.scale[0], 1.0, plain.scale[0], plain.scale[0]])
    np.testing.assert_array_equal(tr.weights[0], plain.weights[0])
    assert entropy(tr.weights[1]) < entropy(plain.weights[1])


# --- fill values and fully masked rows ------------------------------------------------------------------


@pytest.mark.parametrize("fill", FILL_VALUES, ids=FILL_IDS)
def test_fill_value_is_recorded_and_masked_cells_hold_it(bundled, fill):
    tr = attnviz.trace(bundled, TEXT, hide=[1], fill=fill)
    assert (tr.fill == fill).all()
    assert (tr.masked[..., 1] == np.float32(fill)).all()
    assert (tr.weights[..., 1] == 0).all()
    np.testing.assert_allclose(attnviz.softmax(torch.tensor(tr.masked)).numpy(), tr.weights, atol=1e-6)


@pytest.mark.parametrize("fill", FILL_VALUES, ids=FILL_IDS)
def test_fully_masked_rows_never_give_nan(bundled, plain, fill):
    everything = list(range(plain.n_tokens))
    tr = attnviz.trace(bundled, TEXT, hide=everything, fill=fill)
    assert not np.isnan(tr.weights).any()
    if fill == float("-inf"):
        assert (tr.weights == 0).all()  # each query attends to nothing
    else:
        np.testing.assert_allclose(tr.weights, 1 / tr.n_tokens, rtol=1e-6)  # documented: uniform


def test_fully_masked_rows_with_default_fill_are_uniform(bundled, plain):
    tr = attnviz.trace(bundled, TEXT, hide=range(plain.n_tokens))
    np.testing.assert_allclose(tr.weights, 1 / tr.n_tokens, rtol=1e-6)


def test_finite_fills_give_the_same_weights_when_rows_keep_a_key(bundled):
    """Any fill far below the scores gives exp(...) == 0: -10000, -1e9 and -inf agree on partial masks."""
    traces = [attnviz.trace(bundled, TEXT, causal=True, fill=f) for f in FILL_VALUES]
    for tr in traces[1:]:
        np.testing.assert_allclose(tr.weights, traces[0].weights, rtol=0, atol=1e-6)


# --- recompute -----------------------------------------------------------------------------------------


def test_recompute_without_arguments_reproduces_the_stored_stages(bundled):
    tr = attnviz.trace(bundled, TEXT, pad_to=16, hide=[2])
    for layer in (0, 3, -1):
        st = tr.recompute(layer)
        for name in attnviz.STAGES:
            np.testing.assert_array_equal(getattr(st, name), getattr(tr, name)[layer], err_msg=name)


@pytest.mark.parametrize("fill", FILL_VALUES, ids=FILL_IDS)
def test_recompute_equals_fresh_stages_from_scores(plain, fill):
    layer, T = 2, plain.n_tokens
    mask = np.tril(np.ones((T, T), bool))
    mask[:, 4] = False
    mask[0, 0] = False  # a fully masked row
    st = plain.recompute(layer, scale=0.5, mask=mask, fill=fill)
    fresh = stages_from_scores(torch.from_numpy(np.array(plain.scores[layer])), 0.5, torch.from_numpy(mask), fill)
    for name in attnviz.STAGES:
        np.testing.assert_array_equal(getattr(st, name), getattr(fresh, name).numpy(), err_msg=name)
    assert not np.isnan(st.weights).any()
    kept = mask.any(-1)  # rows that still see a key: masked cells get exactly 0
    assert (st.weights[:, kept][:, ~mask[kept]] == 0).all()
    expected_dead_row = 0.0 if fill == float("-inf") else 1 / T  # documented: zeros with -inf, else uniform
    np.testing.assert_allclose(st.weights[:, 0], expected_dead_row, rtol=1e-6)


def test_recompute_changes_only_what_it_is_given(plain):
    st = plain.recompute(1, scale=1.0)
    np.testing.assert_array_equal(st.scores, plain.scores[1])
    np.testing.assert_array_equal(st.scaled, plain.scores[1])
    assert entropy(st.weights) < entropy(plain.weights[1])


def test_recompute_rejects_a_layer_out_of_range(plain):
    with pytest.raises(attnviz.AttnvizError, match="0..5"):
        plain.recompute(plain.n_layer)
