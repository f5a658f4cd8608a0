"""attnviz.analysis.groups against scipy's Jensen-Shannon distance, on a grouped-query Llama's trace."""

from __future__ import annotations

from itertools import combinations

import numpy as np
from scipy.spatial.distance import jensenshannon

import attnviz
from attnviz.analysis import groups

TEXT = "the cat sat on the mat . a dog ran away"


def test_group_divergence_equals_scipys_jensen_shannon_over_every_pair_of_a_groups_heads(tiny_llama):
    tr = attnviz.trace(tiny_llama, TEXT)
    assert tr.kv_groups == ((0, 1), (2, 3))  # 4 query heads, 2 key/value heads (transformers' repeat_kv layout)
    for layer in range(tr.n_layer):
        w = tr.layer(layer).weights.astype(np.float64)
        want = [np.mean([np.mean([jensenshannon(w[a, i], w[b, i]) ** 2 for i in range(tr.n_tokens)])
                         for a, b in combinations(heads, 2)]) for heads in tr.kv_groups]  # fmt: skip
        got = groups.group_divergence(tr, layer)
        np.testing.assert_allclose(got, want, atol=1e-9)
        assert (got > 0).all()  # random heads differ: the measure can fail
    window = groups.group_divergence(tr, 0, queries=(2, 6))
    w = tr.layer(0).weights.astype(np.float64)
    first = np.mean([jensenshannon(w[0, i], w[1, i]) ** 2 for i in range(2, 6)])
    np.testing.assert_allclose(window[0], first, atol=1e-9)


def test_a_model_without_shared_keys_has_one_head_per_group_and_nothing_to_compare(bundled):
    tr = attnviz.trace(bundled, TEXT)
    assert tr.kv_groups == tuple((h,) for h in range(tr.n_head))
    assert (groups.group_divergence(tr, 0) == 0).all()
