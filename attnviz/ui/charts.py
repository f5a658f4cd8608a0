"""The one way a page draws a chart: `chart(fig, *name)`, and the look charts take on a dark page.

Figures come from attnviz.plots print-ready (a white card with dark ink) because the modebar's PNG and SVG and every
export copy the figure's own colours, and Plotly has no option to draw a file in other colours than the screen. So
the figure is never restyled for the theme on the server (which, besides, learns the theme late: Streamlit's
`st.context.theme` may be wrong on a session's first run and after a theme change). Instead one stylesheet recolours
the style's own colours (plots.common.DARK_LOOK) on screen with CSS `light-dark()`, which Streamlit's app container
resolves through its `color-scheme` (light or dark, switched by the theme at once). A file drawn from the chart is
made from the figure, not from the page's styles, so it stays white.
"""

from __future__ import annotations

# Imported whole before any page draws: Plotly's figure checks look pandas up in sys.modules without importing it,
# so a session that builds a figure while another session's thread is still importing pandas met a half-initialised
# module ("partially initialized module 'pandas' has no attribute 'Series'"; eight sessions on a cold server).
import pandas  # noqa: F401
import streamlit as st

from ..export import short_model_name
from ..plots import common
from .plotly_view import PRELOAD_STYLE, plotly_view, slot

_CHART = "[data-testid='stApp'] .js-plotly-plot"


def _rgb(colour: str) -> str:
    """'#262730' as Plotly writes it into an element's style: 'rgb(38, 39, 48)'."""
    c = colour.lstrip("#")
    return "rgb({}, {}, {})".format(*(int(c[i : i + 2], 16) for i in (0, 2, 4)))


def _rules(light: str, dark: str) -> list[str]:
    rgb, swap = _rgb(light), f"light-dark({light}, {dark}) !important"
    # the paper colour stays on text (white numbers on a dark heatmap cell are data ink, not the card)
    fill = f"{_CHART} [style*='fill: {rgb};']" + (":not(text)" if light == common.PAPER else "")
    return [
        f"{fill} {{fill: {swap}}}",
        f"{_CHART} [style*='stroke: {rgb};'] {{stroke: {swap}}}",
        f"{_CHART} .main-svg[style*='background: {rgb};'] {{background: {swap}}}",
    ]


def screen_look() -> str:
    """The stylesheet that gives charts the dark look on a dark page (and changes nothing on a light one)."""
    rules = [rule for light, dark in common.DARK_LOOK.items() for rule in _rules(light, dark)]
    card = common.DARK_LOOK[common.PAPER]
    rules += [  # the modebar floats on the card: its own translucent white and grey icons
        f"{_CHART} .modebar-group {{background-color: light-dark(rgba(255, 255, 255, 0.5), {card}cc) !important}}",
        f"{_CHART} .modebar-btn path {{fill: light-dark(rgba(68, 68, 68, 0.45), rgba(230, 231, 235, 0.55))}}",
        f"{_CHART} .modebar-btn.active path, {_CHART} .modebar-btn:hover path "
        "{fill: light-dark(rgba(68, 68, 68, 0.9), rgba(230, 231, 235, 0.95))}",
    ]
    return "<style>\n" + "\n".join([*rules, PRELOAD_STYLE]) + "\n</style>"


def chart(fig, *name_parts, key: str | None = None, on_select=None):
    """Draw `fig` as built, with the shared modebar config, in the chart slot `key` (by default one named after
    `name_parts`, numbers left out, so the same chart of another layer or head is redrawn in place); `name_parts` name
    the file its camera saves. `on_select()` runs after a click on a point (attnviz.ui.clicks reads it)."""
    return plotly_view(fig, chart_config(*name_parts), key or slot(name_parts), on_select)


def chart_config(*name_parts) -> dict:
    """The modebar config of every chart: the camera saves the format chosen in the sidebar (PNG or SVG), in a file
    named after the model (our module: "module") and what the page passes (layer, head, stage)."""
    src = st.session_state.get("_source")
    model = None if src is None else short_model_name(src.short_label)
    return common.chart_config(model, *name_parts, fmt=st.session_state.get("img_fmt", "png"))
