"""A chart drawn by one Plotly.react per change: our own Streamlit component in place of st.plotly_chart.

Streamlit 1.67's st.plotly_chart keys a chart by an id that includes its figure, so a changed figure mounts a new
chart (Plotly draws it from scratch), and an effect after every mount copies the figure again for the theme, so Plotly
draws it a second time (docs/benchmarks.md). Here each chart slot is one component under a stable key, so it stays
mounted across runs, and a new figure is handed to Plotly.react on the same element: one draw per change.

Plotly's script is the plotly package's own plotly.min.js, the version the figures are written for, served by
Streamlit as a file of a v1 component's folder and run once per tab (assets/plotly_view.js). A click on a point comes
back in st.plotly_chart's selection form ({"selection": {"points": [...]}}), which attnviz.ui.clicks reads.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import plotly
import plotly.io as pio
import streamlit.components.v1 as components_v1
import streamlit.components.v2 as components_v2
from streamlit.errors import StreamlitDuplicateElementKey
from streamlit.runtime import Runtime

NAME = "attnviz_chart"  # the component's name
SCRIPT = "plotly.min.js"
# plotly's package_data: plotly.min.js (and the package's templates and sample data, public like it)
_FILES = components_v1.declare_component("plotly_js", path=Path(plotly.__file__).parent / "package_data")
_VIEW = components_v2.component(
    NAME, js=(Path(__file__).parent / "assets" / "plotly_view.js").read_text(), isolate_styles=False
)


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
    raise RuntimeError(f"more than 100 charts under the key {key!r} in one run")


def preload_html() -> str:
    """A script that starts loading Plotly's script before any chart asks for it (a cold start: app.py), under the
    promise every chart then waits on."""
    js = (Path(__file__).parent / "assets" / "plotly_view.js").read_text()
    start, end = js.index("// A path relative"), js.index("// A click, in")
    return f"<script>(() => {{\n{js[start:end]}\nloadPlotly({json.dumps(script_path())}).catch(() => {{}});\n}})();</script>"
