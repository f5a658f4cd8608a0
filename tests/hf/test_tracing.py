"""Bad and unusual inputs: empty or huge text, odd scripts, literal special tokens, unloadable models,
out-of-range options, and the AttentionTrace record itself (immutable, shape-checked)."""

from __future__ import annotations

import json

import numpy as np
import pytest

import attnviz
from attnviz import AttnvizError, InputError

TEXT = "The cat sat on the mat."


# --- text -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text", ["", " ", "   \n\t  ", "\u3000"], ids=["empty", "space", "whitespace", "ideographic-space"]
)
def test_empty_or_whitespace_text_raises_input_error(bundled, text):
    with pytest.raises(InputError, match="empty") as info:
        attnviz.trace(bundled, text)
    assert "type a sentence" in str(info.value)


def test_non_string_text_raises_input_error(bundled):
    with pytest.raises(InputError):
        attnviz.trace(bundled, None)


def test_text_longer_than_the_model_limit_is_cut_with_a_note(bundled):
    text = " ".join(["word"] * 3000)
    tr = attnviz.trace(bundled, text)
    assert tr.n_tokens == bundled.max_tokens == 512
    assert tr.provenance.n_dropped == 3002 - 512  # 3000 words + [CLS] + [SEP]
    assert tr.tokens[0] == "[CLS]" and tr.tokens[-1] == "[SEP]"
    assert any("3002 tokens" in n and "512" in n for n in tr.notes)
    assert np.isfinite(tr.weights).all()


def test_max_tokens_cuts_earlier(bundled):
    tr = attnviz.trace(bundled, "one two three four five six seven eight nine ten", max_tokens=6)
    assert tr.n_tokens == 6 and tr.provenance.n_dropped == 6
    assert tr.notes


def test_short_text_has_no_note_and_drops_nothing(bundled):
    tr = attnviz.trace(bundled, TEXT)
    assert tr.provenance.n_dropped == 0 and tr.notes == ()


UNUSUAL = {
    "emoji": "I love pizza 🍕🔥😀 and 👩‍👩‍👧 families",
    "cjk": "我爱自然语言处理。日本語のテキスト、한국어 문장",
    "arabic": "القطة جلست على الحصيرة",
    "hebrew": "החתול ישב על השטיח",
    "mixed-rtl": "The word שלום means peace, مرحبا means hello",
    "zero-width": "zero\u200bwidth\u200cjoin\u200dhere\ufeff",
    "only-zero-width": "\u200b\u200b",
    "combining": "e\u0301te\u0301 cafe\u0301 Z\u0351\u0348a\u0352lgo\u0301",
    "control": "tab\there\x00nul\x07bell",
}


@pytest.mark.parametrize("text", UNUSUAL.values(), ids=UNUSUAL.keys())
def test_unusual_scripts_give_finite_traces(bundled, text):
    tr = attnviz.trace(bundled, text)
    assert tr.n_tokens >= 2
    assert np.isfinite(tr.weights).all() and np.isfinite(tr.scores).all()
    np.testing.assert_allclose(tr.weights.sum(-1), 1.0, atol=1e-5)
    assert all(isinstance(t, str) for t in tr.tokens)
    json.dumps(tr.tokens)  # tokens can be shown and serialised


@pytest.mark.parametrize("literal", ["[SEP]", "[PAD]", "[CLS]", "[MASK]"])
def test_literal_special_token_text_is_ordinary_text(bundled, literal):
    tr = attnviz.trace(bundled, f"before {literal} after")
    word = literal.strip("[]").lower()
    assert tr.tokens[0] == "[CLS]" and tr.tokens[-1] == "[SEP]"
    assert tr.tokens.count("[SEP]") == 1 and tr.tokens.count("[CLS]") == 1
    inner = list(tr.tokens[1:-1])
    assert literal not in inner
    start, stop = inner.index("["), inner.index("]")
    assert "".join(t.removeprefix("##") for t in inner[start + 1 : stop]) == word  # e.g. [ sep ] or [ cl ##s ]


def test_literal_sep_is_split_into_bracket_sep_bracket(bundled):
    tr = attnviz.trace(bundled, "one [SEP] two")
    assert tr.tokens == ("[CLS]", "one", "[", "sep", "]", "two", "[SEP]")


def test_pair_adds_a_second_segment_and_blank_pair_is_ignored(bundled):
    single = attnviz.trace(bundled, TEXT)
    pair = attnviz.trace(bundled, TEXT, pair="It was tired.")
    assert pair.tokens.count("[SEP]") == 2 and pair.n_tokens > single.n_tokens
    blank = attnviz.trace(bundled, TEXT, pair="   ")
    assert blank.tokens == single.tokens


# --- options --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("hide", [[99], [-1], [0, 9]])
def test_hide_out_of_range_raises_input_error(bundled, hide):
    with pytest.raises(InputError, match=r"0\.\.8"):  # [CLS] the cat sat on the mat . [SEP]: 9 tokens
        attnviz.trace(bundled, TEXT, hide=hide)


@pytest.mark.parametrize("layers", [[6], [-1], [0, 10]])
def test_layers_out_of_range_raise_input_error(bundled, layers):
    with pytest.raises(InputError, match=r"0\.\.5"):
        attnviz.trace(bundled, TEXT, layers=layers)


@pytest.mark.parametrize("scale", [float("nan"), float("inf")])
def test_non_finite_scale_raises_input_error(bundled, scale):
    with pytest.raises(InputError, match="finite"):
        attnviz.trace(bundled, TEXT, scale=scale)


def test_attention_inputs_rejects_a_missing_layer(bundled):
    with pytest.raises(InputError, match=r"0\.\.5"):
        attnviz.attention_inputs(bundled, TEXT, 6)


def test_trace_rejects_something_that_is_not_a_model():
    with pytest.raises(AttnvizError, match="load_model"):
        attnviz.trace("bert-base-uncased", TEXT)
