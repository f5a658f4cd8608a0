"""Compare: differences, per-head change and Jensen-Shannon divergence against numpy and scipy."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import make_trace
from scipy.spatial.distance import jensenshannon

from attnviz.analysis import compare as C
from attnviz.errors import InputError


def _rows(shape, seed):
    w = np.random.default_rng(seed).random(shape) ** 3
    return w / w.sum(-1, keepdims=True)


def test_difference_change_and_ranking_match_numpy_and_scipy():
    a, b = _rows((4, 6, 6), 0), _rows((4, 6, 6), 1)
    b[2] = a[2]  # head 2 unchanged
    b[1] = 0.5 * a[1] + 0.5 * b[1]  # head 1 changed less than heads 0 and 3
    a[3, 5] = b[3, 5] = 0.0  # a fully masked row (fill -inf) in both: left out of the JS average
    res = C.compare_layers(a, b)
    np.testing.assert_array_equal(res.diff, b - a)
    for h in range(4):
        d = np.abs(b[h] - a[h])
        assert res.change["mean_abs"][h] == pytest.approx(d.mean())
        assert res.change["max_abs"][h] == pytest.approx(d.max())
        rows = range(5) if h == 3 else range(6)
        want = np.mean([jensenshannon(a[h, i], b[h, i]) ** 2 for i in rows])  # scipy gives the distance (sqrt)
        assert res.change["js"][h] == pytest.approx(want, abs=1e-12)
    assert res.change["js"][2] == 0 and res.ranked("mean_abs")[-1] == 2
    assert res.ranked("js").index(1) > min(res.ranked("js").index(0), res.ranked("js").index(3))
    assert [r["head"] for r in res.rows("max_abs")] == res.ranked("max_abs")
    assert np.all(res.change["js"] <= np.log(2) + 1e-12)


def test_traces_of_different_lengths_or_heads_are_refused_with_the_reason():
    a = make_trace(["a", "b", "c"], n_head=3)
    with pytest.raises(InputError, match="3 and 4 tokens.*minimal pair"):
        C.compare_traces(a, make_trace(["a", "b", "c", "d"], n_head=3), 0)
    with pytest.raises(InputError, match="3 and 2 heads"):
        C.compare_traces(a, make_trace(["a", "b", "c"], n_head=2), 0)
    res = C.compare_traces(a, a, 0, 1, "two layers")
    np.testing.assert_array_equal(res.diff, a.layer(1).weights.astype(np.float64) - a.layer(0).weights)
    assert C.changed_tokens(a, make_trace(["a", "x", "c"])) == [1]
