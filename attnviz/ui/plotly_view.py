"""A chart drawn by one Plotly.react per change: our own Streamlit component in place of st.plotly_chart.

Streamlit 1.67's st.plotly_chart keys a chart by an id that includes its figure, so a changed figure mounts a new
chart (Plotly draws it from scratch), and an effect after every mount copies the figure again for the theme, so Plotly
draws it a second time (docs/benchmarks.md). Here each chart slot is one component under a stable key, so it stays
mounted across runs, and a new figure is handed to Plotly.react on the same element: one draw per change.

Plotly's script is our own bundle of plotly.js (assets/plotly-attnviz.min.js: the version plotly.py writes figures
for, with the traces in TRACES alone; scripts/plotly_bundle builds it), served by Streamlit as a file of a v1
component's folder (this package's assets) and run once per tab (assets/load_plotly.js), asked for at the top of every
run (plotly_preload, app.py) rather than by the first chart. A click on a point comes back in st.plotly_chart's
selection form ({"selection": {"points": [...]}}), which attnviz.ui.clicks reads.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import plotly.io as pio
import streamlit.components.v1 as components_v1
import streamlit.components.v2 as components_v2
from streamlit.errors import StreamlitDuplicateElementKey
from streamlit.runtime import Runtime

from ..errors import AttnvizError

NAME = "attnviz_chart"  # the component's name
ASSETS = Path(__file__).parent / "assets"  # its scripts, served as they are
SCRIPT = "plotly-attnviz.min.js"
TRACES = frozenset({"scatter", "bar", "heatmap", "scattergl"})  # the trace types the bundle draws
LOADER = (ASSETS / "load_plotly.js").read_text()  # loadPlotly(path): the chart's and the preload's
PRELOAD_ID = "attnviz-plotly-preload"
# The preload's element container, hidden: it would add a gap above whatever follows it.
PRELOAD_STYLE = f"[data-testid='stElementContainer']:has(#{PRELOAD_ID}) {{display: none}}"
_FILES = components_v1.declare_component("assets", path=ASSETS)
_VIEW = components_v2.component(NAME, js=LOADER + "\n" + (ASSETS / "plotly_view.js").read_text(), isolate_styles=False)


def script_path() -> str:
    """Plotly's script, relative to the app's root URL (registered with this run's Streamlit first)."""
    Runtime.instance().component_registry.register_component(_FILES)
    return f"component/{_FILES.name}/{SCRIPT}"


def slot(name_parts) -> str:
    """A chart's key from what names it, numbers left out: the same chart on another layer or head is the same slot,
    so it is redrawn in place."""
    return "chart:" + "/".join(re.sub(r"\d+", "#", str(p)) for p in name_parts)


def plotly_view(fig, config: dict, key: str, on_select=None):
    """Draw `fig` in the chart slot `key` with Plotly's `config`; `on_select()` runs after a click on a point, which
    st.session_state[key]["selection"] then holds. A second chart of a run under the same key takes the next free
    one ("key~1", ...)."""
    payload = f'{{"figure": {pio.to_json(fig, validate=False)}, "config": {json.dumps(config)}, '
    payload += f'"script": {json.dumps(script_path())}}}'
    callbacks = {"on_selection_change": on_select} if on_select else {}
    for i in range(100):
        try:
            return _VIEW(key=key if i == 0 else f"{key}~{i}", data=payload.encode(), **callbacks)
        except StreamlitDuplicateElementKey:
            continue
    raise AttnvizError(f"more than 100 charts under the key {key!r} in one run")


def plotly_preload() -> str:
    """A script that starts loading Plotly's script before any chart asks for it, under the promise every chart then
    waits on (assets/load_plotly.js); a tab that has it already does nothing. Its element takes no room on the page
    (PRELOAD_STYLE hides it)."""
    start = f"loadPlotly({json.dumps(script_path())}).catch(() => {{}});"
    return f"<span id='{PRELOAD_ID}'></span><script>(() => {{\n{LOADER}\n{start}\n}})();</script>"
