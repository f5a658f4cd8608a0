"""Attention rollout and flow against numbers worked out by hand."""

from __future__ import annotations

import numpy as np
import pytest

from attnviz.analysis import rollout as R
from attnviz.errors import InputError
from attnviz.trace import AttentionTrace

# two layers, two heads, three tokens; each row sums to 1
L0 = np.array(
    [
        [[1.0, 0.0, 0.0], [0.5, 0.5, 0.0], [0.2, 0.3, 0.5]],
        [[0.0, 1.0, 0.0], [0.0, 0.0, 1.0], [1.0, 0.0, 0.0]],
    ]
)
L1 = np.array(
    [
        [[0.2, 0.2, 0.6], [0.0, 1.0, 0.0], [0.5, 0.0, 0.5]],
        [[0.2, 0.6, 0.2], [1.0, 0.0, 0.0], [0.5, 0.5, 0.0]],
    ]
)


def tiny(weights=(L0, L1)):
    return AttentionTrace.from_weights(["a", "b", "c"], np.stack(weights))


def test_rollout_equals_the_hand_computation():
    # heads averaged:   layer 0 -> [[.5 .5 0] [.25 .25 .5] [.6 .15 .25]]; layer 1 -> [[.2 .4 .4] [.5 .5 0] [.5 .25 .25]]
    # 0.5*A + 0.5*I (rows already sum to 1, so no renormalising is needed):
    a0 = np.array([[0.75, 0.25, 0.0], [0.125, 0.625, 0.25], [0.3, 0.075, 0.625]])
    a1 = np.array([[0.6, 0.2, 0.2], [0.25, 0.75, 0.0], [0.25, 0.125, 0.625]])
    np.testing.assert_allclose(R.residual_matrix(L0), a0, atol=1e-7)
    np.testing.assert_allclose(R.residual_matrix(L1), a1, atol=1e-7)
    # a1 @ a0, row 0: .6*[.75 .25 0] + .2*[.125 .625 .25] + .2*[.3 .075 .625] = [.535 .29 .175]
    want = np.array([[0.535, 0.29, 0.175], [0.28125, 0.53125, 0.1875], [0.390625, 0.1875, 0.421875]])
    got = R.rollout(tiny())
    np.testing.assert_allclose(got, want, atol=1e-6)
    np.testing.assert_allclose(got.sum(-1), 1.0)
    np.testing.assert_allclose(R.rollout(tiny(), start=1, end=1), a1, atol=1e-7)  # one layer: its own residual matrix
    np.testing.assert_allclose(R.rollout(tiny(), end=0), a0, atol=1e-7)


def test_rows_are_renormalised_when_the_weights_do_not_sum_to_one():
    w = np.array([[[1.0, 1.0], [0.0, 2.0]]])  # rows sum to 2: 0.5*A + 0.5*I then divided by the row sum
    np.testing.assert_allclose(R.residual_matrix(w), [[1.0 / 1.5, 0.5 / 1.5], [0.0, 1.0]])


def test_flow_equals_the_min_cut_worked_out_by_hand():
    a0, a1 = R.residual_matrix(L0), R.residual_matrix(L1)
    # two layers: the only cuts separate each middle node m from the source or the sink, so
    # max flow (output i -> input j) = sum_m min(a1[i, m], a0[m, j]); flow shares these out over the inputs
    for i in range(3):
        want = np.array([sum(min(a1[i, m], a0[m, j]) for m in range(3)) for j in range(3)])
        np.testing.assert_allclose(R.flow(tiny(), i), want / want.sum(), atol=1e-9)
    np.testing.assert_allclose(R.flow(tiny(), 2, start=1, end=1), a1[2], atol=1e-9)  # one layer: the edge itself


def test_flow_refuses_long_inputs_and_bad_layer_ranges():
    n = R.MAX_FLOW_TOKENS + 1
    long = AttentionTrace.from_weights([str(i) for i in range(n)], np.full((1, 1, n, n), 1.0 / n))
    with pytest.raises(InputError, match="Rollout works at any length"):
        R.flow(long, 0)
    with pytest.raises(InputError, match="start <= end"):
        R.rollout(tiny(), start=1, end=0)
