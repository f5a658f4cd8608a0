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


def chart_config(*parts) -> dict:
    """Plotly modebar config: the camera button saves a PNG named after what it shows (attnviz_layer2_head3_weights)."""
    name = "_".join(["attnviz", *(str(p) for p in parts if p not in (None, ""))])
    name = re.sub(r"[^A-Za-z0-9_.-]+", "-", name)[:120]
    return {
        "displaylogo": False,
        "toImageButtonOptions": {"format": "png", "filename": name, "scale": 2},
        "modeBarButtonsToRemove": ["lasso2d", "select2d"],
    }
