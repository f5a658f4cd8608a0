"""Whole-trace results are computed once for every session (trace.window_cache.remembered), per trace and arguments,
and the scaling what-if computes only the heads it shows."""

from __future__ import annotations

import numpy as np
import pytest

import attnviz
from attnviz.analysis import heads as H
from attnviz.analysis import rollout as R
from attnviz.analysis import scaling
from attnviz.trace import window_cache


@pytest.fixture(scope="module")
def two_traces(bundled):
    text = "The cat sat on the mat."
    return attnviz.trace(bundled, text), attnviz.trace(bundled, text)  # the same text, two trace objects


def test_a_result_is_computed_once_per_trace_and_arguments(two_traces):
    a, b = two_traces
    calls = []

    @window_cache.remembered
    def mean_weights(trace, layer, keys=None):
        calls.append((trace, layer))
        w = trace.stages(layer).weights
        return w.mean(axis=(0, 1)) if keys is None else w[..., np.asarray(keys)].mean(axis=(0, 1))

    first = mean_weights(a, 1)
    assert mean_weights(a, 1) is first and len(calls) == 1  # the second caller reads the first's result
    assert mean_weights(a, 2) is not first and len(calls) == 2  # another argument
    assert mean_weights(b, 1) is not first and len(calls) == 3  # another trace, though of the same text
    np.testing.assert_array_equal(mean_weights(b, 1), first)
    keys = np.array([0, 2])
    assert mean_weights(a, 1, keys=keys) is mean_weights(a, 1, keys=np.array([0, 2])) and len(calls) == 4
    mean_weights(a, 1, keys=np.array([0, 3]))  # arrays compare by value
    assert len(calls) == 5
    with pytest.raises(ValueError):  # shared by every caller: nobody may change it in place
        first[0] = 1.0


def test_remembered_results_equal_a_fresh_computation(two_traces):
    a, b = two_traces
    special = H.special_keys(a, *H.special_tokens_of(attnviz.load_model().tokenizer))
    kept = H.head_stats(a, special)
    assert H.head_stats(a, special) is kept
    fresh = H.head_stats.__wrapped__(b, special)  # the function itself, on the other trace of the same text
    for name, values in fresh.values.items():
        np.testing.assert_allclose(kept[name], values, rtol=1e-6, atol=1e-9)
    assert R.rollout(a, 0, a.n_layer - 1) is R.rollout(a, 0, a.n_layer - 1)
    np.testing.assert_allclose(R.rollout(a), R.rollout.__wrapped__(b), rtol=1e-6)


def test_the_scaling_what_if_computes_only_the_heads_it_shows(two_traces):
    a, _ = two_traces
    one = a.recompute(3, scale=0.5, heads=(4,))
    every = a.recompute(3, scale=0.5)
    assert one.weights.shape == (1, a.n_tokens, a.n_tokens)
    np.testing.assert_allclose(one.weights[0], every.weights[4], rtol=1e-6, atol=1e-7)
    # the weights at the model's own scale are the trace's own, computed by the model's attention
    np.testing.assert_allclose(scaling.compare_scale(a, 3, a.scale[3], head=4).rescaled_weights[0],
                               a.stages(3).weights[4], rtol=1e-5, atol=1e-6)  # fmt: skip


def test_the_scaling_comparison_is_kept_per_view_and_keeps_only_what_the_page_draws(two_traces):
    a, b = two_traces
    part = scaling.compare_scale(a, 2, 0.5, head=1, window=(2, 6))
    assert scaling.compare_scale(a, 2, 0.5, head=1, window=(2, 6)) is part  # a revisit reads it
    other = scaling.compare_scale(a, 2, 0.25, head=1, window=(2, 6))  # another scale is another comparison
    assert other is not part and not np.allclose(other.rescaled_weights, part.rescaled_weights)
    # independent: numpy's softmax of the trace's masked scores times the scale, every key, then the window cut
    s = a.stages(2, heads=1).scores[0].astype(np.float64) * 0.5
    s = np.where(a.layer_mask(2), s, -np.inf)
    w = np.exp(s - s.max(-1, keepdims=True))
    w /= w.sum(-1, keepdims=True)
    np.testing.assert_allclose(part.rescaled_weights[0], w[2:6, 2:6], rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(part.max_rescaled[0], w.max(-1), rtol=1e-5)  # the row measures cover every row
    fresh = scaling.compare_scale(b, 2, 0.5, head=1)  # the whole text on the same text's other trace
    np.testing.assert_array_equal(fresh.rescaled_weights[:, 2:6, 2:6], part.rescaled_weights)
    np.testing.assert_array_equal(fresh.hist_scaled.counts, part.hist_scaled.counts)  # every cell, whatever the window
    assert part.hist_scaled.n == a.n_tokens**2
    with pytest.raises(attnviz.AttnvizError, match="window"):
        scaling.compare_scale(a, 2, 0.5, head=1, window=(4, 4))


def test_an_equal_argument_of_another_type_is_not_handed_a_kept_result(two_traces):
    """True == 1 == 1.0 in Python, but only 1 is a query position: a result kept for flow(trace, 1) must not answer
    flow(trace, True) before the argument check refuses it."""
    a, _ = two_traces
    R.flow(a, 1)
    for wrong in (True, 1.0):
        with pytest.raises(attnviz.AttnvizError, match="query"):
            R.flow(a, wrong)
