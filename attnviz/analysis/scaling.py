"""The scale what-if behind the Scaling page: one layer's stages re-derived with another scale.

Multiplying the scores by a scale s is dividing them by 1/s: the model's 1/sqrt(d_head) is dividing by
sqrt(d_head). Pages show the scale as a fraction ("1/√32") so both readings are visible.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from .. import checks
from ..trace import AttentionTrace
from ..trace.window_cache import remembered
from .law import LawRow, sqrt_d_law
from .stats import Histogram, histogram, row_entropy, row_max


def model_scale(trace: AttentionTrace, layer: int) -> float:
    """The scale this layer applied to q.k: 1/sqrt(d_head) for BERT, 1 for T5-style models."""
    return float(trace.scale[layer])


def scale_stops(d_head: int, model: float | None = None) -> list[float]:
    """Scales from 1 down through 1/sqrt(d) to 1/d: 1/powers of two, 1/sqrt(d) and the model's own scale."""
    d = max(1, int(d_head))
    divisors = {float(2**i) for i in range(int(math.log2(d)) + 1)} | {1.0, float(d), math.sqrt(d)}
    stops = {round(1.0 / x, 8) for x in divisors}
    if model is not None and np.isfinite(model) and model > 0:
        stops.add(round(float(model), 8))
    return sorted(stops, reverse=True)


def scale_label(scale: float, d_head: int, model: float | None = None) -> str:
    """'1', '1/√32 ≈ 0.177', '1/8'; a model scale off the usual stops says so."""
    divisor = 1.0 / scale
    if abs(divisor - math.sqrt(d_head)) < 1e-5 and abs(divisor - round(divisor)) > 1e-5:
        text = f"1/√{d_head} ≈ {scale:.3f}"
    elif abs(divisor - round(divisor)) < 1e-5:
        text = "1" if round(divisor) == 1 else f"1/{round(divisor)}"
    else:
        text = f"{scale:.3g}"
    is_model = model is not None and abs(scale - model) < 1e-7
    return text + (" (the model's)" if is_model else "")


@dataclass(frozen=True)
class ScalingComparison:
    """softmax(scores) next to softmax(scores x scale) for one layer, on one head or all heads: what the Scaling page
    draws of them, small enough to be kept for every revisit (the stages themselves are 4 x [head, query, key]).

    Both sides come from `trace.recompute` (scale 1 and `scale`), so the mask is applied as captured. Arrays are
    restricted to the chosen `heads`: the row measures [head, query] cover every query; the weights [head, query,
    key] only the drawn `window` (start, stop) of queries and keys, each row still the softmax over every key.
    """

    scale: float
    model_scale: float
    heads: tuple[int, ...]
    window: tuple[int, int]
    raw_weights: np.ndarray
    rescaled_weights: np.ndarray
    max_raw: np.ndarray
    max_rescaled: np.ndarray
    entropy_raw: np.ndarray
    entropy_rescaled: np.ndarray
    hist_scores: Histogram
    hist_scaled: Histogram


@remembered  # a revisit, another visitor or another window's redraw of the same view reads it (a few hundred KB)
def compare_scale(
    trace: AttentionTrace,
    layer: int,
    scale: float,
    head: int | None = None,
    bins: int | None = None,
    window: tuple[int, int] | None = None,
) -> ScalingComparison:
    """Cheap what-if: one layer's stages with scale 1 and with `scale`, no new forward pass.

    head=None takes all heads; window: the (start, stop) tokens whose weights are kept (None: every token). Later
    layers are NOT recomputed: they still saw the model's own weights.
    """
    heads = tuple(range(trace.n_head)) if head is None else (int(head),)
    start, stop = checks.inside("window", window, trace.n_tokens)
    raw = trace.recompute(layer, scale=1.0, heads=heads)  # only the heads shown: one head of 12 is 12x less work
    rescaled = trace.recompute(layer, scale=float(scale), heads=heads)
    bins = bins or int(np.clip(2 * math.sqrt(raw.scores.size), 20, 80))  # one head of a short sentence is ~200 cells
    cut = lambda w: np.ascontiguousarray(w[:, start:stop, start:stop])  # noqa: E731 - a copy: the layer is let go
    return ScalingComparison(
        scale=float(scale),
        model_scale=model_scale(trace, layer),
        heads=heads,
        window=(start, stop),
        raw_weights=cut(raw.weights),
        rescaled_weights=cut(rescaled.weights),
        max_raw=row_max(raw.weights),
        max_rescaled=row_max(rescaled.weights),
        entropy_raw=row_entropy(raw.weights),
        entropy_rescaled=row_entropy(rescaled.weights),
        hist_scores=histogram(raw.scores, bins),
        hist_scaled=histogram(rescaled.scaled, bins),
    )


@lru_cache(maxsize=4)
def law_rows(
    dims: tuple[int, ...] = (2, 4, 8, 16, 32, 64, 128, 256, 512, 1024), n_keys: int = 64
) -> tuple[LawRow, ...]:
    """The random-vector experiment, cached: it is the same for every sentence."""
    return tuple(sqrt_d_law(dims=dims, n_queries=1000, n_keys=n_keys, seed=0))
