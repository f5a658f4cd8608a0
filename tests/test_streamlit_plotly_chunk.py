"""A new tab starts loading Plotly as the run starts (attnviz/ui/charts.py, start_plotly) by importing Streamlit's own
Plotly element from its frontend bundle: the file's name and how the bundle loads it are Streamlit's, not a public API.
An upgrade that changes either fails here, by name, before the speed is lost without a word."""

from __future__ import annotations

import re
from pathlib import Path

import streamlit

from attnviz.ui import charts

STATIC = Path(streamlit.__file__).parent / "static"
RECHECK = (
    "A new tab would load Plotly only when its first chart arrives again (about 2 s later on a first visit): find how "
    "the bundle now loads its Plotly element, update attnviz/ui/charts.py (PLOTLY_CHUNK, START_PLOTLY_JS) and run "
    "tests/browser/test_fresh_tab.py."
)


def test_the_bundle_has_one_plotly_element_file_and_loads_it_lazily_by_that_name():
    chunk = charts.plotly_chunk()
    assert chunk is not None, f"Streamlit {streamlit.__version__} has no single {charts.PLOTLY_CHUNK}.*.js. {RECHECK}"
    assert (STATIC / "static" / "js" / chunk).stat().st_size > 1_000_000, "plotly.js itself is in this file"
    (main,) = re.findall(r'<script type="module" crossorigin src="\./static/js/(index\.[\w-]+\.js)"', _index())
    # the main script imports it from its own folder, lazily: the module the page imports early is the one it uses
    assert f"import(`./{chunk}`)" in (STATIC / "static" / "js" / main).read_text(encoding="utf-8"), RECHECK


def test_the_script_finds_the_main_script_the_way_the_page_loads_it():
    # START_PLOTLY_JS looks for the module script whose address holds /static/js/index.
    assert "script[type='module'][src*='/static/js/index.']" in charts.START_PLOTLY_JS
    assert re.search(r'<script type="module" [^>]*src="\./static/js/index\.', _index()), RECHECK


def _index() -> str:
    return (STATIC / "index.html").read_text(encoding="utf-8")
