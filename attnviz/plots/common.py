"""Conventions shared by every figure: safe token labels, colour scales, compact arrays."""

from __future__ import annotations

import html
import math
import re

import numpy as np

WEIGHTS_SCALE = (
    "Viridis"  # sequential, for probabilities 0..1 (set explicitly: Streamlit flips implicit scales in dark mode)
)
SCORES_SCALE = "RdBu_r"  # diverging, for scores that can be negative; centre it with zmid=0
DIFF_SCALE = "PuOr_r"


def escape(token: str) -> str:
    """Make a token safe for Plotly labels, which parse <br>, <b>, <a href> and entities."""
    return html.escape(str(token), quote=True)


def tick_labels(tokens) -> list[str]:
    """'%03d token' labels so repeated tokens ("the" twice) stay separate positions."""
    width = max(2, len(str(len(tokens) - 1)))
    return [f"{i:0{width}d} {escape(t)}" for i, t in enumerate(tokens)]


def f32(a) -> np.ndarray:
    """Plotly sends float32 as compact base64 typed arrays (float16 and float64 fall back or bloat)."""
    return np.ascontiguousarray(a, dtype=np.float32)


def symmetric_range(a: np.ndarray) -> float:
    """Half-width of a colour range centred on 0 that covers the finite values of `a`."""
    finite = np.abs(a[np.isfinite(a)])
    return float(finite.max()) if finite.size else 1.0


def thin(n: int, most: int) -> int:
    """The step that labels at most `most` of `n` positions (every position when they fit)."""
    return max(1, math.ceil(n / most))


IMAGE_FORMATS = ("png", "svg")
PRINT_BACKGROUND, PRINT_TEXT = "#ffffff", "#111111"


def chart_config(*parts, fmt: str = "png") -> dict:
    """Plotly modebar config: the camera button saves an image (`fmt`: png or svg) named after what it shows
    (attnviz_layer2_head3_weights)."""
    name = "_".join(["attnviz", *(str(p) for p in parts if p not in (None, ""))])
    name = re.sub(r"[^A-Za-z0-9_.-]+", "-", name)[:120]
    fmt = fmt if fmt in IMAGE_FORMATS else "png"
    return {
        "displaylogo": False,
        "toImageButtonOptions": {"format": fmt, "filename": name, "scale": 2 if fmt == "png" else 1},
        "modeBarButtonsToRemove": ["lasso2d", "select2d"],
    }


def print_ready(fig):
    """A copy of `fig` with a white background and dark text whatever the dashboard's theme: for files."""
    import plotly.graph_objects as go

    out = go.Figure(fig)
    out.update_layout(
        template="plotly_white", paper_bgcolor=PRINT_BACKGROUND, plot_bgcolor=PRINT_BACKGROUND, font_color=PRINT_TEXT
    )
    return out
