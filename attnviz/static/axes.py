"""Where a figure's axes are on the picture: each plotly axis (xaxis, xaxis2, ...) mapped from data to pixels."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .pieces import array, numbers


@dataclass
class Axis:
    """One axis: its domain (fraction of the plot area), its range in data units, its categories if any."""

    name: str  # "x", "x2", "y", ...
    spec: dict
    domain: tuple[float, float] = (0.0, 1.0)
    span: tuple[float, float] = (0.0, 1.0)
    categories: dict = field(default_factory=dict)

    @property
    def log(self) -> bool:
        return self.spec.get("type") == "log"

    def position(self, value) -> float:
        """A data value's position on the axis (a category's index; log10 of the value on a log axis)."""
        if isinstance(value, str | int | float) and value in self.categories:
            return float(self.categories[value])
        if not _numeric(value):
            return np.nan
        with np.errstate(all="ignore"):
            return float(np.log10(value)) if self.log else float(value)


def _numeric(value) -> bool:
    return isinstance(value, int | float | np.integer | np.floating)


def positions(values, axis: Axis) -> np.ndarray:
    """Many data values as axis positions."""
    a = array(values)
    if a.dtype != object:
        with np.errstate(all="ignore"):
            return np.log10(a.astype(float)) if axis.log else a.astype(float)
    return np.array([axis.position(v) if v is not None else np.nan for v in a.tolist()], dtype=float)


class Axes:
    """Every axis of a figure and the pixel box of its plot area."""

    def __init__(self, data: list, layout: dict, width: int, height: int, margin: dict):
        self.left, self.right = margin["l"], width - margin["r"]
        self.top, self.bottom = margin["t"], height - margin["b"]
        self.axes: dict[str, Axis] = {}
        for trace in data:
            for letter in "xy":
                name = trace.get(f"{letter}axis", letter)
                if name not in self.axes:
                    spec = layout.get(f"{letter}axis{name[1:]}") or {}
                    self.axes[name] = Axis(name, spec, tuple(spec.get("domain") or (0.0, 1.0)))
        for axis in self.axes.values():
            _categorise(axis, data)
        for axis in self.axes.values():
            axis.span = _span(axis, data)

    def axis(self, name: str) -> Axis:
        if name not in self.axes:  # an annotation on an axis no trace uses: the whole plot area
            self.axes[name] = Axis(name, {})
        return self.axes[name]

    def px(self, name: str, value: float) -> float:
        """A position on axis `name` in pixels (x from the left, y from the top)."""
        axis = self.axis(name)
        lo, hi = axis.span
        frac = (value - lo) / ((hi - lo) or 1.0)
        return self.paper(name[0], axis.domain[0] + frac * (axis.domain[1] - axis.domain[0]))

    def paper(self, letter: str, frac: float) -> float:
        """A fraction of the plot area (plotly's 'paper' coordinates) in pixels."""
        if letter == "x":
            return self.left + frac * (self.right - self.left)
        return self.bottom - frac * (self.bottom - self.top)

    def ref(self, letter: str, ref: str | None, value) -> float:
        """An annotation's or shape's coordinate by its xref/yref: 'paper', 'x2 domain' or an axis's data."""
        ref = ref or "paper"
        if ref == "paper":
            return self.paper(letter, float(value))
        if ref.endswith(" domain"):
            d = self.axis(ref.split()[0]).domain
            return self.paper(letter, d[0] + float(value) * (d[1] - d[0]))
        return self.px(ref, self.axis(ref).position(value))


def _categorise(axis: Axis, data: list) -> None:
    spec = axis.spec
    order = list(spec.get("categoryarray") or [])
    if not order and spec.get("type") != "category":
        values = [
            v
            for t in data
            if t.get(f"{axis.name[0]}axis", axis.name[0]) == axis.name
            for v in array(t.get(axis.name[0])).ravel().tolist()[:10_000]
        ]
        if not any(isinstance(v, str) for v in values):
            return
        order = values
    for v in order:
        axis.categories.setdefault(v, len(axis.categories))


def _span(axis: Axis, data: list) -> tuple[float, float]:
    spec = axis.spec
    if spec.get("range") and len(spec["range"]) == 2 and spec.get("autorange") not in (True, "reversed"):
        return tuple(float(v) for v in spec["range"])
    lo, hi = np.inf, -np.inf
    for trace in data:
        if trace.get(f"{axis.name[0]}axis", axis.name[0]) == axis.name:
            a, b = _extent(trace, axis)
            lo, hi = min(lo, a), max(hi, b)
    if not np.isfinite(lo) or not np.isfinite(hi):
        lo, hi = 0.0, 1.0
    if lo == hi:
        lo, hi = lo - 0.5, hi + 0.5
    pad = 0.0 if any(t.get("type") == "heatmap" for t in data) else (hi - lo) * 0.04
    lo, hi = lo - pad, hi + pad
    return (hi, lo) if spec.get("autorange") == "reversed" else (lo, hi)


def _extent(trace: dict, axis: Axis) -> tuple[float, float]:
    """The data extent of one trace along `axis` (a heatmap's cell edges, a bar from its base)."""
    letter = axis.name[0]
    kind = trace.get("type", "scatter")
    if kind == "heatmap":
        z = numbers(trace.get("z"))
        n = z.shape[1 if letter == "x" else 0] if z.ndim == 2 else 0
        centres = cell_centres(trace, letter, n, axis)
        step = (centres[-1] - centres[0]) / (n - 1) if n > 1 else 1.0
        return (
            (min(centres[0], centres[-1]) - abs(step) / 2, max(centres[0], centres[-1]) + abs(step) / 2)
            if n
            else (0, 1)
        )
    values = positions(trace.get(letter), axis) if trace.get(letter) is not None else None
    other = "y" if letter == "x" else "x"
    if values is None:
        values = np.arange(len(array(trace.get(other))), dtype=float)
    values = values[np.isfinite(values)]
    if not values.size:
        return (np.inf, -np.inf)
    if kind == "bar" and (trace.get("orientation", "v") == "v") == (letter == "y"):
        return (min(0.0, values.min()), max(0.0, values.max()))
    return (values.min(), values.max())


def cell_centres(trace: dict, letter: str, n: int, axis: Axis) -> np.ndarray:
    """Positions of a heatmap's n columns (x) or rows (y): its x/y values, or x0 + dx * i."""
    if trace.get(letter) is not None and len(array(trace.get(letter))) == n:
        return positions(trace.get(letter), axis)
    start, step = float(trace.get(f"{letter}0", 0) or 0), float(trace.get(f"d{letter}", 1) or 1)
    return start + step * np.arange(n)
