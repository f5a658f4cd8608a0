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


def test_rows_taken_in_blocks_give_what_numpy_and_scipy_give_over_the_whole_layer():
    n = 2 * C.ROWS + 7  # three blocks of query rows, the last one short
    a, b = _rows((2, n, 9), 2), _rows((2, n, 9), 3)
    a[1, C.ROWS :] = b[1, C.ROWS :] = 0.0  # fully masked rows past the first block: left out of the JS average
    res, measures_only = C.compare_layers(a, b), C.compare_layers(a.astype(np.float32), b, keep_diff=False)
    d = np.abs(b - a)
    np.testing.assert_allclose(res.change["mean_abs"], d.reshape(2, -1).mean(axis=1), rtol=1e-12)
    np.testing.assert_array_equal(res.change["max_abs"], d.reshape(2, -1).max(axis=1))
    rows = {0: range(n), 1: range(C.ROWS)}
    want = [np.mean([jensenshannon(a[h, i], b[h, i]) ** 2 for i in rows[h]]) for h in range(2)]
    np.testing.assert_allclose(res.change["js"], want, rtol=1e-9, atol=1e-15)
    assert measures_only.diff is None
    np.testing.assert_allclose(measures_only.change["js"], want, rtol=1e-5)  # float32 a: its rounding, no more


def test_traces_of_different_lengths_or_heads_are_refused_with_the_reason():
    a = make_trace(["a", "b", "c"], n_head=3)
    with pytest.raises(InputError, match="3 and 4 tokens.*minimal pair"):
        C.compare_traces(a, make_trace(["a", "b", "c", "d"], n_head=3), 0)
    with pytest.raises(InputError, match="3 and 2 heads"):
        C.compare_traces(a, make_trace(["a", "b", "c"], n_head=2), 0)
    res = C.compare_traces(a, a, 0, 1, "two layers")
    np.testing.assert_array_equal(res.diff, a.layer(1).weights.astype(np.float64) - a.layer(0).weights)
    assert C.changed_tokens(a, make_trace(["a", "x", "c"])) == [1]


def test_a_window_keeps_only_its_cells_of_the_difference_and_every_cell_in_the_measures():
    a = make_trace(["a", "b", "c", "d", "e"], n_head=3)
    whole = C.compare_traces(a, a, 0, 1, "two layers")
    part = C.compare_traces(a, a, 0, 1, "two layers", window=((1, 4), (0, 2)))
    assert C.compare_traces(a, a, 0, 1, "two layers", window=((1, 4), (0, 2))) is part  # kept for a revisit
    want = a.layer(1).weights.astype(np.float64) - a.layer(0).weights  # numpy's own difference, then the window
    np.testing.assert_array_equal(part.diff, want[:, 1:4, 0:2])
    for name, values in whole.change.items():
        np.testing.assert_array_equal(part.change[name], values)
    other = C.compare_traces(a, a, 0, 1, "two layers", window=((0, 3), (0, 2)))  # another window, other cells
    np.testing.assert_array_equal(other.diff, want[:, 0:3, 0:2])
    with pytest.raises(InputError, match="window"):
        C.compare_traces(a, a, 0, 1, "two layers", window=((0, 9), (0, 2)))


# --- the default sentence b: one word swapped, checked with the model's own tokenizer --------------------------

CORPUS = ["the cat sat on the mat because it was tired", "a cat and a cat and the cat", "the man ran home"] * 20


def _bpe():
    """A byte-level BPE (GPT-2's scheme) trained here: 'cat' is one token, 'dog' is never seen."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(
        CORPUS, trainers.BpeTrainer(vocab_size=300, initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    )
    return lambda t: len(tok.encode(t).ids)


def _sentencepiece():
    """A SentencePiece-style unigram model with the '▁' word marker (Llama's scheme), trained here."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tok = Tokenizer(models.Unigram())
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.train_from_iterator(CORPUS, trainers.UnigramTrainer(vocab_size=60, unk_token="<unk>", special_tokens=["<unk>"]))
    return lambda t: len(tok.encode(t).ids)


def _wordpiece(bundled):
    return lambda t: len(bundled.tokenizer(t, split_special_tokens=True)["input_ids"])


@pytest.mark.parametrize("scheme", ["wordpiece", "bpe", "sentencepiece"])
def test_minimal_pair_keeps_the_token_count_in_every_scheme(scheme, bundled):
    count = {"wordpiece": lambda: _wordpiece(bundled), "bpe": _bpe, "sentencepiece": _sentencepiece}[scheme]()
    for text in ("The cat sat on the mat because it was tired.", "the man ran home because he was tired"):
        b, old, new = C.minimal_pair(text, count)
        assert count(b) == count(text) and b != text
        assert b.replace(new, old, 1) == text  # exactly one word swapped
    if scheme == "bpe":  # 'dog' splits into pieces here, so the cat -> dog swap is refused and another word goes
        assert count("The dog sat") != count("The cat sat")
        assert C.minimal_pair("The cat sat", count)[2] != "dog"


def test_minimal_pair_says_when_no_swap_keeps_the_count():
    assert C.minimal_pair("The cat sat.", lambda t: t) is None  # every other text counts differently
    assert C.minimal_pair("?!", len) is None  # no word to swap


def test_short_number_keeps_small_changes_readable():
    assert C.short_number(0.000412) == "0.000412" and C.short_number(4.123e-05) == "4.12e-05"
    assert C.short_number(0.5) == "0.5"
