"""The sidebar's Token limit stops at what the device holds of a trace of this model, and says so."""

from __future__ import annotations

import pytest
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


def _export_page(monkeypatch, **link) -> AppTest:
    """The Export page (it traces nothing until a file is uploaded) on a server allowing 4,096 tokens."""
    monkeypatch.setenv("ATTNVIZ_MAX_TOKENS", "4096")
    at = AppTest.from_file(APP, default_timeout=120)
    for key, value in link.items():
        at.query_params[key] = value
    at.switch_page("app_pages/export.py").run()  # the page straight away, as a link opens it
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_the_token_limit_follows_the_chosen_model_up_to_the_servers_cap(monkeypatch, family_dir):
    at = _export_page(monkeypatch)
    assert at.session_state["max_tokens"] == 512  # the bundled model's 512 positions
    at.session_state["source"], at.session_state["model"] = "hub", str(family_dir("long_llama"))  # 8,192 positions
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.session_state["max_tokens"] == 4096  # the server's cap, not the last model's 512
    assert "max_tokens" not in at.query_params  # the link is not rewritten to a limit nobody chose


@pytest.mark.parametrize("linked", ["256", "512"])  # 512: the bundled model's largest, the default it would follow
def test_a_token_limit_the_link_sets_stays_when_the_model_changes(monkeypatch, family_dir, linked):
    at = _export_page(monkeypatch, max_tokens=linked)
    at.session_state["source"], at.session_state["model"] = "hub", str(family_dir("long_llama"))
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.session_state["max_tokens"] == int(linked) and at.query_params["max_tokens"] == linked
