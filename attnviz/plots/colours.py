"""Colour scales for attention heatmaps: weights 0..1 (linear, per-row max, power 0.5 or log), the score stages
symmetric around 0, and the colour bar that labels each."""

from __future__ import annotations

import math

import numpy as np

from .common import SCORES_SCALE, WEIGHTS_SCALE, symmetric_range
from .value_weighted import PROBABILITIES


def colour(stage: str, values: np.ndarray, robust: bool = False, mode: str = "linear") -> dict:
    """Explicit colour scale and range: 0..1 for weights, symmetric around 0 for the score stages.

    robust=True sets the score range at the 99.5th percentile of |value| instead of the maximum, so one
    extreme head does not wash out all the others (used by the overview, where patterns matter most).
    `mode` (a COLOUR_RANGES id) applies to weights, which are then drawn as `colour_values(...)`: log spans
    log10(LOG_FLOOR)..0, every other mode 0..1.
    """
    if stage in PROBABILITIES:
        low, high = (math.log10(LOG_FLOOR), 0.0) if mode == "log" else (0.0, 1.0)
        return dict(colorscale=WEIGHTS_SCALE, zmin=low, zmax=high)
    r = symmetric_range(values)
    if robust:
        finite = np.abs(values[np.isfinite(values)])
        r = float(np.percentile(finite, 99.5)) if finite.size else r
    r = r if r > 0 else 1.0
    return dict(colorscale=SCORES_SCALE, zmin=-r, zmax=r, zmid=0.0)


#: Colour ranges for weights (URL id -> label). At 400 tokens most weights sit near 1/400, so a linear 0..1
#: scale draws almost everything dark; the others show the structure. Hover always shows the true weight.
COLOUR_RANGES = {"linear": "linear 0..1", "row": "per-row max", "sqrt": "power 0.5", "log": "log"}
LOG_FLOOR = 1e-4  # the log range's bottom: weights below it share the darkest colour


def transformed(stage: str, mode: str) -> bool:
    """True when the colours are not the values themselves (hover must carry the true weight)."""
    return stage in PROBABILITIES and mode in COLOUR_RANGES and mode != "linear"


def colour_values(stage: str, values: np.ndarray, mode: str = "linear") -> np.ndarray:
    """What to draw for `values` in colour range `mode`: weights / their row's max, sqrt(weights) or
    log10(weights) (floored at LOG_FLOOR); unchanged for linear and for the score stages. Float32, NaN kept."""
    v = np.asarray(values, dtype=np.float32)
    if not transformed(stage, mode):
        return v
    if mode == "row":
        with np.errstate(invalid="ignore"):
            peak = np.nanmax(np.where(np.isnan(v), -np.inf, v), axis=-1, keepdims=True)
        return np.where(peak > 0, v / np.where(peak > 0, peak, 1.0), 0.0).astype(np.float32)
    if mode == "sqrt":
        return np.sqrt(np.clip(v, 0.0, None))
    return np.log10(np.clip(v, LOG_FLOOR, None))


def colour_bar(stage: str, mode: str, title: str) -> dict:
    """The colour bar for `colour(...)`: ticks labelled with true weights for the power and log ranges."""
    bar = dict(title=dict(text=title, side="right"), thickness=14)
    if not transformed(stage, mode):
        return bar
    if mode == "row":
        bar["title"]["text"] = "weight ÷ row max"
        return bar
    vals = [1e-4, 1e-3, 0.01, 0.1, 1.0] if mode == "log" else [0.0, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0]
    bar["title"]["text"] = f"{title} ({'log' if mode == 'log' else '√'} scale)"
    return bar | dict(
        tickmode="array",
        tickvals=colour_values(stage, np.array(vals), mode).tolist(),
        ticktext=[f"{v:g}" for v in vals],
    )
