"""Our module with one head (`m_heads=1`, which the sidebar offers): every page opens, draws or says why, and names
the only head instead of a slider from 0 to 0 (which Streamlit refuses with StreamlitInvalidMinMaxError).

One AppTest per page, the page chosen before its first run (no first run of the default page)."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import APP, charts
from streamlit.testing.v1 import AppTest

PAGES = sorted(str(p.relative_to(Path(APP).parent)) for p in (Path(APP).parent / "app_pages").glob("*.py"))


@pytest.mark.parametrize("page", PAGES)
def test_every_page_works_with_a_one_head_module(page):
    at = AppTest.from_file(APP, default_timeout=120)
    for key, value in {"text": "The cat sat on the mat.", "source": "module", "m_heads": 1}.items():
        at.session_state[key] = value
    at.switch_page(page).run()
    assert not at.exception, [e.value for e in at.exception]
    assert not [s for s in at.slider if s.label == "Head"], "a slider over one head"
    drawn = charts(at) or at.get("arrow_data_frame") or at.get("download_button")
    assert drawn or [*at.info, *at.warning], "neither a chart nor a sentence saying why not"
