"""The two views beside every weights heatmap (analysis.values.attention_view): weights or value-weighted rows, one
head computed alone, merged into words with rows still of 1, compared only when both sides keep values."""

from __future__ import annotations

import numpy as np
import pytest

import attnviz
from attnviz.analysis import compare as C
from attnviz.analysis import words as W
from attnviz.analysis.values import VALUE_WEIGHTED, attention_view, value_norms
from attnviz.errors import InputError
from attnviz.trace import AttentionTrace

TEXT = "the cat sat on the mat because it was tired"


@pytest.fixture(scope="module")
def trace(tiny_llama):
    return attnviz.trace(tiny_llama, TEXT)


def test_one_head_and_a_window_equal_the_same_cells_of_the_whole_layer(trace):
    norms = value_norms(trace, 1).astype(np.float64)  # every head, every row: the reference
    whole = norms / norms.sum(-1, keepdims=True)
    one = attention_view(trace, 1, VALUE_WEIGHTED, heads=3, queries=(2, 7), keys=(1, 5))
    assert one.shape == (1, 5, 4)
    np.testing.assert_allclose(one[0], whole[3, 2:7, 1:5], atol=1e-6)
    np.testing.assert_array_equal(attention_view(trace, 1, "weights", heads=3)[0], trace.stages(1).weights[3])
    with pytest.raises(InputError, match="Unknown view"):
        attention_view(trace, 1, "scores")


def test_value_weighted_rows_merged_into_words_still_sum_to_one(trace):
    share = attention_view(trace, 1, VALUE_WEIGHTED)
    groups = [[0, 1], [2], [3, 4, 5], [6], [7, 8, 9], *[[i] for i in range(10, trace.n_tokens)]]  # pieces of words
    merged = W.merge_words(share, groups)
    assert merged.shape == (trace.n_head, len(groups), len(groups))
    np.testing.assert_allclose(merged.sum(-1), 1.0, atol=1e-5)
    np.testing.assert_allclose(merged[:, 2, 4], share[:, 3:6, 7:10].sum(-1).mean(-1), atol=1e-6)


def test_compare_value_weighted_needs_both_sides_values_and_names_the_one_without(trace):
    result = C.compare_traces(trace, trace, 0, 1, "two layers", VALUE_WEIGHTED)
    a, b = attention_view(trace, 0, VALUE_WEIGHTED), attention_view(trace, 1, VALUE_WEIGHTED)
    np.testing.assert_allclose(result.diff, b.astype(np.float64) - a, atol=1e-7)
    given = AttentionTrace.from_weights(trace.tokens, trace.weights)  # the same weights, no values
    with pytest.raises(InputError, match=r"b \(two traces\) has none\. This trace gives no value vectors"):
        C.compare_traces(trace, given, 0, 0, "two traces", VALUE_WEIGHTED)
    with pytest.raises(InputError, match=r"; a \(two traces\) has none"):
        C.compare_traces(given, trace, 0, 0, "two traces", VALUE_WEIGHTED)
    assert C.compare_traces(given, trace, 0, 0, "two traces").diff.shape == result.diff.shape  # weights still work
