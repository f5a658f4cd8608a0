"""Word view: word groups for WordPiece, SentencePiece and byte-level BPE, and merging checked with loops."""

from __future__ import annotations

import numpy as np
import pytest

import attnviz
from attnviz.analysis import words as W

TEXT = "the unbelievably tired cat snoozed"
CORPUS = ["the cat sat on the mat", "a dog ran away", "it was tired because the cat ran"] * 20 + [
    " ".join("abcdefghijklmnopqrstuvwxyz")
]


def test_wordpiece_hash_continues_the_word_and_specials_stand_alone():
    toks = ["[CLS]", "the", "un", "##bel", "##ievably", "cat", ".", "[SEP]", "##x", "[PAD]"]
    groups = W.word_groups(toks)
    assert W.detect_scheme(toks) == "wordpiece"
    assert groups == [[0], [1], [2, 3, 4], [5], [6], [7], [8], [9]]  # "##x" after a special starts a word
    assert W.word_labels(toks, groups)[2] == "unbelievably"


def test_sentencepiece_underline_starts_a_word():
    toks = ["<s>", "▁The", "▁un", "believ", "ably", "▁cat", ".", "</s>"]
    assert W.detect_scheme(toks) == "sentencepiece"
    groups = W.word_groups(toks)
    assert groups == [[0], [1], [2, 3, 4], [5, 6], [7]]  # "." has no space before it: part of "cat."
    assert W.word_labels(toks, groups) == ["<s>", "The", "unbelievably", "cat.", "</s>"]


def test_byte_level_bpe_space_marker_starts_a_word():
    toks = ["The", "Ġun", "bel", "ievably", "Ġcat", "Ċ", "Ġsat", "<|endoftext|>"]
    assert W.detect_scheme(toks) == "bpe"
    groups = W.word_groups(toks)
    assert groups == [[0], [1, 2, 3], [4], [5], [6], [7]]  # the first token starts a word without a space
    assert W.word_labels(toks, groups)[:3] == ["The", "unbelievably", "cat"]


def test_special_positions_can_be_given_explicitly():
    toks = ["<bos>", "▁a", "b"]
    assert W.word_groups(toks, "sentencepiece", special=[False, False, False]) == [[0], [1, 2]]
    assert W.word_groups(["<bos>", "b"], "sentencepiece", special=[False, False]) == [[0, 1]]  # not special: b joins it
    with pytest.raises(ValueError):
        W.word_groups(toks, "unigram")


def _loop_merge(w, groups):
    out = np.zeros((w.shape[0], len(groups), len(groups)))
    for h in range(w.shape[0]):
        for a, qa in enumerate(groups):
            for b, kb in enumerate(groups):
                out[h, a, b] = np.mean([sum(w[h, i, j] for j in kb) for i in qa])
    return out


def test_merge_sums_keys_and_averages_queries_rows_still_sum_to_one():
    rng = np.random.default_rng(0)
    w = rng.random((3, 7, 7))
    w /= w.sum(-1, keepdims=True)
    groups = [[0], [1, 2, 3], [4], [5, 6]]
    merged = W.merge_words(w, groups)
    np.testing.assert_allclose(merged, _loop_merge(w, groups), atol=1e-12)
    np.testing.assert_allclose(merged.sum(-1), 1.0, atol=1e-12)
    np.testing.assert_allclose(W.merge_words(w, [[i] for i in range(7)]), w)  # one piece per word: unchanged


def _words_of(tokenizer_cls, **kw):
    tok = tokenizer_cls(**kw)
    tok.train_from_iterator(CORPUS, vocab_size=60, min_frequency=1, show_progress=False)
    tokens = tok.encode(TEXT).tokens
    groups = W.word_groups(tokens)
    return tokens, W.word_labels(tokens, groups)


def test_real_sentencepiece_and_byte_level_bpe_tokenizers_give_back_the_words():
    from tokenizers import ByteLevelBPETokenizer, SentencePieceBPETokenizer

    sp_tokens, sp_words = _words_of(SentencePieceBPETokenizer)
    assert any(t.startswith("▁") for t in sp_tokens) and len(sp_tokens) > 5  # words were cut into pieces
    assert sp_words == TEXT.split()
    bpe_tokens, bpe_words = _words_of(ByteLevelBPETokenizer)
    assert any(t.startswith("Ġ") for t in bpe_tokens) and len(bpe_tokens) > 5
    assert bpe_words == TEXT.split()


def test_bundled_wordpiece_trace_merges_to_its_words(bundled):
    tr = attnviz.trace(bundled, "The unbelievably tired cat snoozed.")
    groups = W.word_groups(tr.tokens)
    labels = W.word_labels(tr.tokens, groups)
    assert labels == ["[CLS]", "the", "unbelievably", "tired", "cat", "snoozed", ".", "[SEP]"]
    w = tr.layer(2).weights
    np.testing.assert_allclose(W.merge_words(w, groups), _loop_merge(w, groups), atol=1e-6)
