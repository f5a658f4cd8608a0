"""Every page at 4,096 tokens (#10): the token limit is a setting, and a long-context model's pages stay usable.

A tiny Llama-shaped model with 8,192 positions (the same code path as a real long-context decoder, on the CPU)
and ATTNVIZ_MAX_TOKENS=4096. Each page must draw without an error, say what part of the text it shows, and send
a bounded amount of figure data to the browser (every figure at full size would be hundreds of MB).
"""

from __future__ import annotations

import json

import pytest
from helpers import APP, figures, texts
from streamlit.testing.v1 import AppTest

N = 4096
TEXT = " ".join(["the cat sat on the mat because it was tired ."] * 400)  # 4,400 words: cut at 4,096 tokens
PAIR_A = " ".join(("the cat sat on the mat because it was tired .".split() * 400)[:4000])  # 4,000 tokens
PAGES = ["heads", "scaling", "masks", "module", "headstats", "rollout", "neuron", "scores", "words", "pairs"]


@pytest.fixture(scope="module")
def long_llama(family_dir):
    return str(family_dir("long_llama"))


@pytest.mark.parametrize("page", PAGES)
def test_every_page_at_4096_tokens_draws_says_what_it_shows_and_stays_small(page, long_llama, monkeypatch):
    monkeypatch.setenv("ATTNVIZ_MAX_TOKENS", str(N))
    at = AppTest.from_file(APP, default_timeout=600)  # a busy CI host: a page at 4,096 tokens may take a while
    # the Sentence pairs page draws once there is a pair: 4,000 + 5 tokens, so sentence B fits in the limit
    text, pair = (PAIR_A, "the dog ran away .") if page == "pairs" else (TEXT, "")
    for key, value in dict(source="hub", model=long_llama, text=text, pair=pair).items():
        at.session_state[key] = value
    at.switch_page(f"app_pages/{page}.py").run()
    assert not at.exception, [e.value for e in at.exception]
    assert not texts(at, "error"), texts(at, "error")
    figs = figures(at)
    assert figs, f"{page}: no figure at {N} tokens"
    notes = " ".join(texts(at, "warning") + texts(at, "info") + texts(at, "caption") + texts(at, "markdown"))
    if page == "pairs":
        assert "Sentence A: tokens 0–3999" in notes, notes[:500]
    else:
        assert f"first {N:,}" in notes or f"first {N}" in notes, f"{page}: the page does not say it cut the text"
    size = sum(len(json.dumps(f)) for f in figs.values())
    assert size < 16 * 2**20, f"{page}: {size / 2**20:.1f} MB of figures at {N} tokens"
    if page == "heads":
        assert f"of {N:,}" in figs["head_grid"]["layout"]["title"]["text"]  # the window it shows, said in the title
