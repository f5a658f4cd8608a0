"""Every page of a byte-level BPE model (GPT-2) names its tokens as text: no "Ġcat" or "Ċ" on an axis, in hover, in a
table or in a widget's choices; the Words page merges pieces its own way and is checked in test_page_words."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import APP, charts
from streamlit.testing.v1 import AppTest

PAGES = sorted(str(p.relative_to(Path(APP).parent)) for p in (Path(APP).parent / "app_pages").glob("*.py"))
MARKERS = ("Ġ", "Ċ")


def _shown_text(at) -> str:
    """What the page's charts, tables and choice widgets hold, as one string."""
    out = [json.dumps(sent["figure"], ensure_ascii=False) for sent in charts(at)]
    out += [el.value.to_csv() for el in at.dataframe]
    for widget in (*at.selectbox, *at.multiselect, *at.select_slider):
        out += [str(widget.format_func(o)) if hasattr(widget, "format_func") else str(o) for o in widget.options]
    return "\n".join(out)


@pytest.mark.parametrize("page", [p for p in PAGES if not p.endswith("words.py")])
def test_byte_level_tokens_read_as_text_on_every_page(page, gpt2_bpe_dir):
    at = AppTest.from_file(APP, default_timeout=120)
    state = {"text": "The cat sat on the mat.\nThe dog ran away.", "source": "hub", "model": str(gpt2_bpe_dir)}
    for key, value in state.items():
        at.session_state[key] = value
    at.switch_page(page).run()
    assert not at.exception, [e.value for e in at.exception]
    shown = _shown_text(at)
    assert not [m for m in MARKERS if m in shown], page
    no_text = ("app_pages/scaling.py", "app_pages/scores.py", "app_pages/pairs.py", "app_pages/ablation.py")
    if charts(at) and page not in no_text:  # ablation's charts name predicted tokens, not the text's
        assert "·cat" in shown or "·sat" in shown, page  # the tokens are there, spaces shown as ·
