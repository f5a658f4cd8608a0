"""Sentence pairs: the boundary read from the tokens, block shares against loops, the boundary shapes."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from helpers import make_trace

import attnviz
from attnviz.analysis import pairs as P
from attnviz.errors import InputError
from attnviz.plots.pairs import boundary_shapes
from attnviz.trace import Provenance


def test_boundary_after_the_first_separator_run():
    assert P.segment_boundary(["[CLS]", "a", "b", "[SEP]", "c", "[SEP]"]) == 4
    assert P.segment_boundary(["<s>", "a", "</s>", "</s>", "c", "</s>"]) == 4  # RoBERTa: both middle </s> in A
    assert P.segment_boundary(["[CLS]", "a", "b", "[SEP]"]) is None  # one sentence
    assert P.segment_boundary(["a", "b", "c"]) is None  # joined without separator: count instead
    assert P.boundary_from_count(2, 3) == 2
    with pytest.raises(InputError):
        P.boundary_from_count(3, 3)


def test_sentence_a_is_counted_only_when_no_separator_decides():
    calls = []

    def count_a():  # stands for tokenizing sentence A alone: it must not run when separators decide
        calls.append(1)
        return 2

    def paired(tokens):
        tr = make_trace(tokens, n_layer=1, n_head=1)
        return dataclasses.replace(tr, provenance=Provenance("synthetic", options=(("pair", "b c"),)))

    assert P.pair_boundary(paired(["[CLS]", "a", "[SEP]", "b", "c", "[SEP]"]), count_a) == (3, P.SEPARATOR_RULE)
    assert calls == []
    assert P.pair_boundary(paired(["a", "b", "c"]), count_a) == (2, P.COUNT_RULE) and calls == [1]


def _loop_shares(w, boundary, end):
    n_head = w.shape[0]
    side = lambda i: "A" if i < boundary else "B"  # noqa: E731
    out = {k: np.zeros(n_head) for k in (*P.BLOCKS, "crossing")}
    for h in range(n_head):
        for x in "AB":
            rows = [i for i in range(end) if side(i) == x]
            for y in "AB":
                per_row = [sum(w[h, i, j] for j in range(end) if side(j) == y) for i in rows]
                out[f"{x}->{y}"][h] = sum(per_row) / len(per_row)
        crossing = sum(w[h, i, j] for i in range(end) for j in range(end) if side(i) != side(j))
        out["crossing"][h] = crossing / end
    return out


def test_block_shares_equal_loops_and_complementary_rows_sum_to_one():
    rng = np.random.default_rng(1)
    w = rng.random((3, 9, 9))
    w[..., 7:] = 0.0  # two padding keys
    w /= w.sum(-1, keepdims=True)
    got = P.block_shares(w, 3, end=7)
    want = _loop_shares(w, 3, 7)
    for k in want:
        np.testing.assert_allclose(got[k], want[k], atol=1e-12, err_msg=k)
    np.testing.assert_allclose(got["A->A"] + got["A->B"], 1.0)
    np.testing.assert_allclose(got["B->A"] + got["B->B"], 1.0)
    with pytest.raises(InputError):
        P.block_shares(w, 0)


def test_bundled_pair_boundary_matches_token_type_ids(bundled):
    text, pair = "The cat sat on the mat.", "It was tired."
    tr = attnviz.trace(bundled, text, pair=pair, pad_to=20)
    types = bundled.tokenizer(text, pair)["token_type_ids"]
    assert P.segment_boundary(tr.tokens) == types.index(1)
    assert P.real_length(tr.layer_mask(0), tr.n_tokens) == len(types)
    assert P.pair_text(tr) == pair


def test_boundary_shapes_draw_two_lines_between_the_sentences():
    v, h = boundary_shapes(4, (0, 10))
    assert (v["x0"], v["x1"], v["y0"], v["y1"]) == (3.5, 3.5, -0.5, 9.5)
    assert (h["y0"], h["y1"], h["x0"], h["x1"]) == (3.5, 3.5, -0.5, 9.5)
    assert boundary_shapes(4, (5, 10)) == [] and boundary_shapes(None) == []
    assert boundary_shapes(6, (5, 10), "x2", "y2")[0]["xref"] == "x2"
