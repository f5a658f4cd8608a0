"""Strange text, through the Python API and through every page: a trace or a clear message, never a traceback."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from helpers import charts
from streamlit.testing.v1 import AppTest

import attnviz
from attnviz import ui
from attnviz.hf.encode import char_limit, encode

APP = str(Path(__file__).parents[2] / "app.py")
PAGES = ["app_pages/heads.py", "app_pages/scaling.py", "app_pages/masks.py", "app_pages/module.py"]
TEXTS = {
    "one character": "a",
    "10,000 characters": ("Attention is all you need. " * 400)[:10_000],
    "emoji and combining": "Cafe\u0301 \U0001f642\U0001f44d\U0001f3fd e\u0308",
    "CJK": "\u4f60\u597d\u4e16\u754c\uff0c\u6ce8\u610f\u529b\u673a\u5236\u3002",
    "Arabic and Hebrew": "\u0645\u0631\u062d\u0628\u0627 \u0628\u0627\u0644\u0639\u0627\u0644\u0645 \u05e9\u05dc\u05d5\u05dd",
    "zero-width and control": "a\u200bb\u200dc\u0007d\u001b[31me\u0000f",
    "literal special tokens": "[CLS] [SEP] [PAD] [MASK] <|endoftext|>",
    "markup": '<img src=x onerror=alert(1)> <script>alert(2)</script> <br> <a href="javascript:alert(3)">x</a>',
}


@pytest.mark.parametrize("name", list(TEXTS))
def test_the_api_traces_strange_text(bundled, name):
    tr = attnviz.trace(bundled, TEXTS[name])
    assert tr.n_tokens >= 3 and tr.tokens[0] == "[CLS]" and tr.tokens[-1] == "[SEP]"
    assert tr.tokens.count("[SEP]") == 1 and "[PAD]" not in tr.tokens and "[MASK]" not in tr.tokens
    assert np.isfinite(tr.weights).all() and np.allclose(tr.weights.sum(-1), 1, atol=1e-5)


def test_ten_thousand_characters_are_truncated_and_say_so(bundled):
    tr = attnviz.trace(bundled, TEXTS["10,000 characters"])
    assert tr.n_tokens == 512 and tr.provenance.n_dropped > 1000
    assert any("kept the first 512" in n for n in tr.notes)


class TokenizerSpy:
    """The real tokenizer, noting how many characters each call hands it."""

    def __init__(self, tokenizer):
        self.tokenizer, self.seen = tokenizer, []

    def __call__(self, text, pair=None, **kw):
        self.seen.append((len(text), len(pair or "")))
        return self.tokenizer(text, pair, **kw)

    def __getattr__(self, name):
        return getattr(self.tokenizer, name)


def test_five_megabytes_of_sentence_or_pair_are_cut_before_the_tokenizer_sees_them(bundled):
    spy, big = TokenizerSpy(bundled.tokenizer), "word " * 1_000_000
    enc = encode(spy, big, big, limit=512)
    assert len(enc.ids) == 512 and max(max(seen) for seen in spy.seen) == char_limit(512) == 20_480
    assert enc.notes[:2] == [
        "The text was 5,000,000 characters; only the first 20,480 were tokenized.",
        "The second sentence was 5,000,000 characters; only the first 20,480 were tokenized.",
    ]
    tr = attnviz.trace(bundled, "The cat sat.", pair=big)
    assert tr.n_tokens == 512 and dict(tr.provenance.options)["pair"] == big[:20_480]  # the pair as traced
    assert any("second sentence was 5,000,000 characters" in n for n in tr.notes)


def test_endoftext_typed_by_a_user_is_text(bundled):
    tr = attnviz.trace(bundled, "<|endoftext|>")
    assert tr.tokens[1:4] == ("<", "|", "end")


@pytest.mark.parametrize("page", PAGES)
@pytest.mark.parametrize("name", list(TEXTS) + ["empty", "whitespace"])
def test_every_page_handles_strange_text(page, name):
    text = {**TEXTS, "empty": "", "whitespace": "  \n\t "}[name]
    at = AppTest.from_file(APP, default_timeout=120)
    at.session_state["text"] = text
    at.switch_page(page).run()
    assert not at.exception, [e.value for e in at.exception]
    assert charts(at) or at.info or at.warning, "neither a chart nor a message"
    if name in ("empty", "whitespace"):
        assert "Type a sentence" in " ".join(i.value for i in at.info)


def _page(page: str, query: dict | None = None, **state) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=120)
    for key, value in (query or {}).items():
        at.query_params[key] = value
    for key, value in state.items():
        at.session_state[key] = value
    at.switch_page(page).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_five_megabytes_of_sentence_or_pair_on_a_page_are_cut_with_a_note():
    big = "word " * 1_000_000  # what a crafted message could carry into session state
    at = _page("app_pages/pairs.py", text=big, pair=big)
    notes = [i.value for i in at.info]
    assert "The sentence is longer than 20,000 characters: only the first 20,000 are used." in notes
    assert "The second sentence is longer than 20,000 characters: only the first 20,000 are used." in notes
    assert len(at.session_state["text"]) == len(at.session_state["pair"]) == 20_000
    assert charts(at), "the page still draws"


def test_a_long_sentence_in_the_link_is_cut_with_a_note_and_an_over_long_link_is_ignored():
    at = _page("app_pages/heads.py", {"text": "word " * 100_000})  # 500,000 characters in the address bar
    assert len(at.session_state["text"]) == 20_000 and charts(at)
    assert any(i.value.startswith("The sentence is longer than 20,000 characters") for i in at.info)
    at = _page("app_pages/heads.py", {"text": "word " * 1_000_000})  # Streamlit drops a query over 524,288 chars
    assert at.session_state["text"] == ui.DEFAULT_TEXT and charts(at)
