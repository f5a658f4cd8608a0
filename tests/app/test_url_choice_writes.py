"""url_choice writes the address only when its own id changes.

Every write of `st.query_params` sends the server's copy of the whole address, and that copy is as old as the run:
a slider the browser moved while the run was going (a bound widget, written by the browser itself) is missing from
it, so a needless write puts the old head back into the address bar. In a browser this is a race (a Chromium test
of a whole session is in tests/browser/test_links.py); here the rule behind it is checked run by run, counting the
writes that reach Streamlit's own query-params object."""

from __future__ import annotations

import pytest
from streamlit.runtime.state.query_params_proxy import QueryParamsProxy
from streamlit.testing.v1 import AppTest


def _stage_and_colour():
    import streamlit as st

    from attnviz.plots.colours import COLOUR_RANGES
    from attnviz.ui.state import URL, url_choice

    st.radio("Stage", ["weights", "scores"], key="stage", bind=URL)  # the browser writes this one
    url_choice(st.radio, "Colour range", COLOUR_RANGES, key="colour")


@pytest.fixture
def writes(monkeypatch) -> list[tuple]:
    """Every write and delete of `st.query_params` in this test's runs, in order (then passed on unchanged)."""
    seen: list[tuple] = []
    set_item, del_item = QueryParamsProxy.__setitem__, QueryParamsProxy.__delitem__

    def counted_set(self, key, value):
        seen.append(("set", key, value))
        set_item(self, key, value)

    def counted_del(self, key):
        seen.append(("del", key))
        del_item(self, key)

    monkeypatch.setattr(QueryParamsProxy, "__setitem__", counted_set)
    monkeypatch.setattr(QueryParamsProxy, "__delitem__", counted_del)
    return seen


def test_a_run_that_leaves_the_colour_alone_writes_no_address(writes):
    at = AppTest.from_function(_stage_and_colour)
    at.query_params["colour"] = "log"
    at.run()  # a link: the address sets the control and already says what it shows
    assert at.radio(key="colour").value == "log" and writes == []
    for stage in ("scores", "weights", "scores"):  # another control's runs, as the head slider's were
        at.radio(key="stage").set_value(stage).run()
        assert writes == [], (stage, writes)
    assert at.query_params["colour"] == "log"


def test_a_run_writes_the_colour_when_it_changes_and_only_then(writes):
    at = AppTest.from_function(_stage_and_colour).run()
    assert writes == [] and "colour" not in at.query_params  # the default is left out of the link
    at.radio(key="colour").set_value("sqrt").run()
    assert writes == [("set", "colour", ["sqrt"])] and at.query_params["colour"] == "sqrt"
    at.radio(key="stage").set_value("scores").run()
    assert len(writes) == 1
    at.radio(key="colour").set_value("linear").run()  # back to the default: the id leaves the link
    assert writes[1:] == [("del", "colour")] and "colour" not in at.query_params


def test_an_address_emptied_in_a_running_session_is_written_back(writes):
    """A page switch clears the address bar; the session keeps its choice and puts it back."""
    at = AppTest.from_function(_stage_and_colour).run()
    at.radio(key="colour").set_value("log").run()
    at.query_params.clear()
    at.run()
    assert at.radio(key="colour").value == "log" and at.query_params["colour"] == "log"
    assert writes == [("set", "colour", ["log"])] * 2
