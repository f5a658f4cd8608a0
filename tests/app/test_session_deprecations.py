"""A session logs no deprecation warning from Streamlit (st.components.v1.html logged one on every run of every page)."""

from __future__ import annotations

import logging

from helpers import APP
from streamlit.testing.v1 import AppTest


class _Kept(logging.Handler):
    def __init__(self):
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record):
        self.messages.append(record.getMessage())


def test_a_session_logs_no_deprecation_warning():
    kept = _Kept()
    logger = logging.getLogger("streamlit.deprecation_util")  # where Streamlit logs every deprecated call
    logger.addHandler(kept)
    try:
        at = AppTest.from_file(APP, default_timeout=120)
        at.run()
        for page in ("app_pages/scaling.py", "app_pages/heads.py"):  # the frame's own scripts run on every page
            at.switch_page(page).run()
            assert not at.exception, (page, [e.value for e in at.exception])
        at.session_state["tile_opened"] = True  # as a tile click leaves it: the page scrolls to the opened head
        at.run()
    finally:
        logger.removeHandler(kept)
    assert not kept.messages, kept.messages[:3]  # everything this logger says is a deprecation
