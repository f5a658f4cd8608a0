"""The sidebar's Token limit stops at what the device holds of a trace of this model, and says so."""

from __future__ import annotations

from helpers import APP
from streamlit.testing.v1 import AppTest

import attnviz


def test_the_token_limit_stops_at_what_a_hosted_budget_holds(monkeypatch):
    monkeypatch.setenv("ATTNVIZ_HOSTED", "1")
    monkeypatch.setenv("ATTNVIZ_TRACE_CACHE_MB", "3")  # hosted: the trace cache's budget is the device's
    tr = attnviz.trace(attnviz.load_model(), "the cat sat on the mat " * 5)
    per_token = tr.nbytes / tr.n_tokens  # what a real trace of the bundled model holds per token
    expected = int(3 * 2**20 // per_token)
    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    limit = at.sidebar.select_slider(key="max_tokens")
    top = max(int(str(o).replace(",", "")) for o in limit.options)
    assert abs(top - expected) <= 1, (top, expected)
    assert top < 256  # below the hosted server's own cap: the budget decided
    said = [c.value for c in at.sidebar.caption if "on this device" in c.value]
    assert said and f"Up to {top:,} tokens on this device: model positions 512, memory 3 MB" in said[0], said
