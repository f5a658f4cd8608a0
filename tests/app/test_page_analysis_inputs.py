"""The Words, Sentence pairs, Compare and Export pages with our module, markup and an empty text: no traceback."""

from __future__ import annotations

import pytest
from helpers import run_page

PAGES = ["app_pages/words.py", "app_pages/pairs.py", "app_pages/compare.py", "app_pages/export.py"]


@pytest.mark.parametrize("page", PAGES)
@pytest.mark.parametrize(
    "state",
    [
        dict(source="module", text="The cat sat on the mat.", pair="It was tired."),
        dict(text="<img src=x onerror=alert(1)> [SEP] ##ing ▁x", pair="<b>b</b>"),
        dict(text="   "),
    ],
    ids=["module", "markup", "empty"],
)
def test_page_survives(page, state):
    at = run_page(page, **state)
    assert not at.exception, [e.value for e in at.exception]
