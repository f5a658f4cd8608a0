"""Back and Forward between views lean on two names inside Streamlit that no public API offers (attnviz/ui/state.py
says why): the frontend method that writes a bound widget into the address bar, and the rerun flag that says a run
replays Back or Forward. An upgrade that renames either fails here, by name, before any browser test does."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import streamlit
from streamlit.runtime.scriptrunner_utils.script_run_context import ScriptRunContext

from attnviz.ui import state

RECHECK = (
    "Back/Forward between views (attnviz/ui/state.py HISTORY_JS and history_navigation) relies on it: find the new "
    "name, update state.py, and run tests/browser/test_small_screens.py::test_back_and_forward_move_between_views."
)


def _bundle_methods(name: str) -> list[str]:
    """The first 1,000 characters of every method called `name` in Streamlit's frontend bundle."""
    static = Path(streamlit.__file__).parent / "static"
    return [
        text[m.start() : m.start() + 1000]
        for js in static.rglob("*.js")
        for text in [js.read_text(encoding="utf-8", errors="replace")]
        for m in re.finditer(rf"\b{name}\([\w,]*\)\{{", text)
    ]


def test_the_bound_widget_writer_is_still_the_method_that_replaces_the_address():
    found = _bundle_methods(state.WIDGET_URL_WRITER)
    assert found, f"Streamlit {streamlit.__version__}'s bundle has no method {state.WIDGET_URL_WRITER}. {RECHECK}"
    assert any("history.replaceState" in body for body in found), (
        f"Streamlit {streamlit.__version__}'s {state.WIDGET_URL_WRITER} no longer calls history.replaceState. {RECHECK}"
    )
    assert f"'{state.WIDGET_URL_WRITER}'" in state.HISTORY_JS  # the script keys on the very name checked here


def test_a_rerun_still_says_whether_it_replays_back_or_forward():
    names = {f.name for f in dataclasses.fields(ScriptRunContext)}
    assert state.HISTORY_RERUN_FLAG in names, (
        f"Streamlit {streamlit.__version__}'s ScriptRunContext has no {state.HISTORY_RERUN_FLAG}. {RECHECK}"
    )
