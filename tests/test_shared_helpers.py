"""The helpers written once for what several modules need: key/value heads shared out to query heads, the token
limit, an error's first line."""

from __future__ import annotations

import pytest
import torch
from transformers.models.llama.modeling_llama import repeat_kv

from attnviz.attention import expand_kv
from attnviz.errors import AttnvizError, first_line
from attnviz.hf.encode import token_limit


@pytest.mark.parametrize("n_kv", [1, 2, 4, 8])
def test_expand_kv_is_transformers_repeat_kv(n_kv):
    kv = torch.randn(2, n_kv, 5, 3)  # [batch, kv head, key, d]
    assert torch.equal(expand_kv(kv, 8, dim=1), repeat_kv(kv, 8 // n_kv))


def test_expand_kv_of_some_heads_picks_the_rows_repeat_kv_gives_them():
    kv = torch.randn(2, 7, 3)  # [kv head, key, d]
    heads = torch.tensor([5, 0, 13, 6])
    want = repeat_kv(kv[None], 7)[0][heads]  # 14 query heads, 2 per kv head
    assert torch.equal(expand_kv(kv, 14, heads), want)


def test_expand_kv_returns_the_tensor_itself_when_nothing_is_shared_and_refuses_a_bad_split():
    kv = torch.randn(4, 2, 3)
    assert expand_kv(kv, 4) is kv
    with pytest.raises(AttnvizError, match="3 key/value heads"):
        expand_kv(torch.randn(3, 2, 2), 8)


@pytest.mark.parametrize(("asked", "want"), [(None, 512), (100, 100), (10_000, 512), (1, 2), (2, 2)])
def test_the_token_limit_stays_within_two_and_the_most(asked, want):
    assert token_limit(512, asked) == want


@pytest.mark.parametrize("asked", [0, -5, "64", 2.0, True, 2**40])
def test_the_token_limit_refuses_a_max_tokens_that_is_no_positive_whole_number_within_the_limit(asked):
    with pytest.raises(AttnvizError, match="max_tokens"):
        token_limit(512, asked)


def test_an_error_is_shown_by_its_first_line_cut_to_the_limit():
    assert first_line(ValueError("bad shape\nTraceback ...\n  more")) == "bad shape"
    assert first_line(RuntimeError("")) == ""  # an empty message has no first line to index
    assert first_line(KeyError("x" * 500), 10, named=True) == "KeyError: 'xxxxxxxxx"
    assert first_line("plain text\nsecond", named=False) == "plain text"
