"""Distributions of attention numbers: histograms binned server-side, normal reference curves, row measures."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Histogram:
    """Counts of the finite values of a stage, binned server-side (millions of scores never reach the browser)."""

    counts: np.ndarray  # [bins] int64
    edges: np.ndarray  # [bins + 1] float64
    n: int  # finite values counted (= counts.sum())
    mean: float
    var: float

    @property
    def centers(self) -> np.ndarray:
        return (self.edges[:-1] + self.edges[1:]) / 2

    @property
    def width(self) -> float:
        return float(self.edges[1] - self.edges[0])


def histogram(values, bins: int = 60, value_range: tuple[float, float] | None = None) -> Histogram:
    """Histogram of the finite entries of `values` (-inf fills and NaN are left out), with their mean and variance."""
    v = np.asarray(values, dtype=np.float64).ravel()
    v = v[np.isfinite(v)]
    if v.size == 0:
        return Histogram(np.zeros(bins, np.int64), np.linspace(-1.0, 1.0, bins + 1), 0, math.nan, math.nan)
    lo, hi = value_range if value_range is not None else (float(v.min()), float(v.max()))
    if not hi > lo:  # all values equal: give the single bar some width
        lo, hi = lo - 0.5, hi + 0.5
    counts, edges = np.histogram(v, bins=bins, range=(lo, hi))
    return Histogram(counts.astype(np.int64), edges, int(v.size), float(v.mean()), float(v.var()))


def normal_curve(hist: Histogram, var: float, mean: float = 0.0, points: int = 200) -> tuple[np.ndarray, np.ndarray]:
    """N(mean, var) as expected counts per bin of `hist`, so it overlays the bars on the same y axis."""
    x = np.linspace(hist.edges[0], hist.edges[-1], points)
    if not (var > 0 and np.isfinite(var)):
        return x, np.zeros_like(x)
    pdf = np.exp(-((x - mean) ** 2) / (2 * var)) / math.sqrt(2 * math.pi * var)
    return x, pdf * hist.n * hist.width


def row_max(weights: np.ndarray) -> np.ndarray:
    """Largest weight of every row (near 1: the softmax picked one key, i.e. it saturated)."""
    return np.asarray(weights).max(axis=-1)


def row_entropy(weights: np.ndarray) -> np.ndarray:
    """Entropy of every row in nats: log(n_keys) for a uniform row, 0 for a one-hot row, 0 for an all-zero row."""
    p = np.asarray(weights, dtype=np.float64)
    return -(p * np.log(np.where(p > 0, p, 1.0))).sum(axis=-1)
