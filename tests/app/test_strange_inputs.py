"""Strange text, through the Python API and through every page: a trace or a clear message, never a traceback."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

import attnviz

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


def test_endoftext_typed_by_a_user_is_text(bundled):
    tr = attnviz.trace(bundled, "<|endoftext|>")
    assert tr.tokens[1:4] == ("<", "|", "end")


@pytest.mark.parametrize("page", PAGES)
@pytest.mark.parametrize("name", list(TEXTS) + ["empty", "whitespace"])
def test_every_page_handles_strange_text(page, name):
    text = {**TEXTS, "empty": "", "whitespace": "  \n\t "}[name]
    at = AppTest.from_file(APP, default_timeout=120)
    at.session_state["text"] = text
    at.run()
    at.switch_page(page).run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.get("plotly_chart") or at.info or at.warning, "neither a chart nor a message"
    if name in ("empty", "whitespace"):
        assert "Type a sentence" in " ".join(i.value for i in at.info)
