"""A text read in windows of a few queries, a causal window over only the keys its rows reach, gives what one window
over the whole text gives: every statistic, the histogram, the examples with their keys, the head distances."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import attnviz
from attnviz.analysis.heads import special_keys, special_tokens_of
from attnviz.corpus.examples import strongest_keys
from attnviz.corpus.rows import windows
from attnviz.corpus.state import ProfileState, Settings

TEXTS = ["the cat sat on the mat .", "a dog ran away , the dog was tired .", "hello world", "the mat the mat the mat"]


@pytest.mark.parametrize("family", ["tiny_bert", "tiny_gpt2", "tiny_llama"])
def test_small_windows_give_the_profile_of_whole_texts(family, request):
    loaded = request.getfixturevalue(family)
    s, specials = Settings(distance_rows=0, qk_samples=0, top=6), special_tokens_of(loaded.tokenizer)
    whole, parts = (ProfileState(loaded.n_layer, loaded.n_head, s) for _ in range(2))
    cells = loaded.n_layer * loaded.n_head * 12  # a window of 3 queries x 4 keys, or of one query
    read = []
    for i, text in enumerate(TEXTS):
        tr = attnviz.trace(loaded, text)
        whole.observe(tr, i, special_keys(tr, *specials))
        parts.observe(tr, i, special_keys(tr, *specials), cells=cells)
        read += [(win.weights.shape[2], win.weights.shape[3], tr.n_keys) for win in windows(tr, cells)]
    assert max(w for w, _, _ in read) > 1 and min(w for w, _, _ in read) == 1
    # a decoder's window reads the keys up to its last query; an encoder's rows see every key
    assert any(k < n for _, k, n in read) == (family != "tiny_bert")
    a, b = whole.means.result(), parts.means.result()
    assert sorted(a) == sorted(b)
    for name in a:
        np.testing.assert_allclose(b[name], a[name], atol=1e-6, err_msg=name)
    np.testing.assert_array_equal(parts.histogram.counts, whole.histogram.counts)
    np.testing.assert_allclose(parts.divergence.result(), whole.divergence.result(), atol=1e-6)
    ea, eb = whole.examples.rows(), parts.examples.rows()
    strip = lambda e: {k: v for k, v in e.items() if k not in ("max_weight", "key_weights")}  # noqa: E731
    assert [strip(e) for e in eb] == [strip(e) for e in ea] and len(ea) > 0
    for x, y in zip(ea, eb):
        np.testing.assert_allclose(
            y["key_weights"] + [y["max_weight"]], x["key_weights"] + [x["max_weight"]], atol=1e-6
        )


def test_the_rows_an_example_selection_keeps_are_a_stable_sorts_first_on_a_device_sort_too():
    """Examples keep each head's k best rows, ties to the earlier query; on an accelerator the sort runs there
    (examples.first with a device): the same indices as numpy's stable sort, ties and rows that may not be chosen
    (inf) included. Run here through torch on the CPU, the path a GPU takes."""
    import numpy as np
    import torch

    from attnviz.corpus.examples import first

    rng = np.random.default_rng(0)
    a = rng.integers(0, 4, (3, 5, 40)).astype(np.float64)  # many ties
    a[rng.random(a.shape) < 0.4] = np.inf
    want = np.stack([[sorted(range(40), key=lambda j: (row[j], j))[:6] for row in head] for head in a])
    assert (first(a, 6) == want).all()
    assert (first(a, 6, torch.device("cpu")) == want).all()


def test_an_examples_strongest_keys_name_equal_weights_lowest_key_first():
    """Which of several equal weights a stored example names is fixed here, not by torch.topk's algorithm (whose
    ties depend on the row's length): the k largest, largest first, equal ones lowest key first (Python's sort of
    (-weight, key)); keys past a row's own length never named (a row of 3 keys names 3)."""
    rng = np.random.default_rng(0)
    x = torch.as_tensor(rng.integers(0, 4, (64, 19)) / 4, dtype=torch.float32)  # many ties, zeros among them
    short = torch.tensor([[0.0, 0.5, 0.0, -math.inf, -math.inf]])  # a 3-key row among longer ones
    keys, weights = strongest_keys(x, 8)
    for row, got, w in zip(x.tolist(), keys.tolist(), weights.tolist()):
        want = sorted(range(len(row)), key=lambda j: (-row[j], j))[:8]
        assert got == want and w == [row[j] for j in want]
    assert strongest_keys(short, 3)[0].tolist() == [[1, 0, 2]]
