"""Margins that need no second layout pass.

Plotly lays a figure out once with the margins it is given, then, when a colour bar or an axis's tick labels need
more room than that, grows the margins and lays everything out again: two passes on every draw, about half of each
chart's drawing time (measured in Chromium on the Heads page's charts). Streamlit draws a chart afresh whenever its
figure changes, so every page paid the second pass on every new sentence, layer and head. Margins given at least
that room are laid out once. The estimates below lean generous (a few pixels of white at most); one that falls
short costs only the second pass, as before, never a clipped label.

`room(fig)` reads the room a whole figure needs from its own layout and data (the outer axes' tick labels and
titles, its colour bars, a legend beside the plot); common.finish, which every figure ends in, gives each at least
that. It reads a Figure or a figure still as plain dicts (one that finish makes a Figure of, unvalidated, after its
margins are set).
"""

from __future__ import annotations

import math
import re

import numpy as np

#: The room a vertical colour bar at Plotly's default place takes right of the plot (its offset, bar, tick labels and
#: a title on its side): measured 82-101 px on the Heads page's charts (weights, scores, the sqrt and log ranges).
_TITLED_BAR_ROOM = 118  # with a title beside it
_BAR_ROOM = 92  # without one
_BAR_THICKNESS = 30  # Plotly's default; a thinner bar takes that much less
#: The width of a tick label's character, as a fraction of its font size (Source Sans averages ~0.5; digits ~0.55).
_CHAR_EM = 0.62
#: room()'s closer estimate for labels with letters: the token labels of Rollout's and Head statistics' matrices
#: measured 0.51 (a wider margin narrows their columns: at 128 tokens their slanted key labels ran into each other)
_ROOM_EM = 0.52
_TITLE_ROOM = 32  # an axis title beside its tick labels: its line and the gap to them
#: More beside a y axis's word labels when it has no title: Who reads' "head 10" (10 px) is 32.8 px wide and Plotly
#: gave its margin 46 px (Chromium), 13 px more than the label where tick_room counts 8 and _ROOM_EM's estimate was
#: 3.6 px wide: 1 px short (a title's room covers it; numbers' wider em covers them)
_UNTITLED_Y_GAP = 6
_AXIS = re.compile(r"^([xy])axis(\d*)$")


def tick_room(labels, size: float = 12, angle: float = 0, title: bool = True, em: float = _CHAR_EM) -> int:
    """Pixels an axis's tick labels (and its title, when `title`) take out from the plot: the longest label's width,
    or its extent across the axis when the labels are slanted by `angle` degrees; `em`: a character's width."""
    longest = max((len(str(t)) for t in labels), default=0) * em * size
    across = (
        longest * abs(math.sin(math.radians(angle))) + size * abs(math.cos(math.radians(angle))) if angle else longest
    )
    return math.ceil(across + 8 + (_TITLE_ROOM if title else 0))


def room(fig) -> dict[str, int]:
    """The margins (l, r, b) `fig` needs so that Plotly lays it out in one pass: its outer axes' tick labels and
    titles (the left-most y axes, the bottom x axes: a grid's inner axes sit between its panels) and its colour bars.
    `fig`: a Figure, or {"data": [trace dicts], "layout": {...}}."""
    if isinstance(fig, dict):
        data, layout = fig["data"], fig["layout"]
    else:
        data, layout = fig.data, fig.layout.to_plotly_json()
    size = (layout.get("font") or {}).get("size") or 12
    axes = {"x": {}, "y": {}} | {f"{m[1]}{m[2]}": layout[k] or {} for k in layout if (m := _AXIS.match(k))}
    out = {"l": 0, "r": max(_bars_room(data, layout), _legend_room(data, layout, size)), "b": 0}
    for name, axis in axes.items():
        side = _outer_side(name, axis, axes)
        if side is None:
            continue
        font = ((axis.get("tickfont") or {}).get("size")) or size
        labels = _labels(data, name, axis) if axis.get("showticklabels", True) else []
        title = bool((axis.get("title") or {}).get("text"))
        angle = axis.get("tickangle")
        angle = angle if isinstance(angle, (int, float)) else 0
        em = _ROOM_EM if any(c.isalpha() for t in labels for c in t) else _CHAR_EM  # digits run wider than words
        if not labels and not title:  # hidden labels (the Heads grid's keys): nothing pushes this side
            need = 0
        elif side == "b":
            slanted = tick_room(labels, font, angle, title, em)
            need = slanted if angle else math.ceil(1.3 * font + 8 + _TITLE_ROOM * title)
        else:
            need = tick_room(labels, font, 0, title, em) + (_UNTITLED_Y_GAP if em == _ROOM_EM and not title else 0)
        need += axis.get("ticklabelstandoff") or 0
        out[side] = max(out[side], need)
    return out


def _outer_side(name: str, axis: dict, axes: dict) -> str | None:
    """'l', 'r' or 'b' for an axis on the figure's outer edge (one whose labels push a margin), else None."""
    if axis.get("overlaying") or axis.get("visible") is False:
        return None
    other = "y" if name[0] == "x" else "x"
    anchor = axis.get("anchor") or other + name[1:]
    start = ((axes.get(anchor) or {}).get("domain") or [0, 1])[0]
    first = min(((a.get("domain") or [0, 1])[0] for n, a in axes.items() if n[0] == other), default=0)
    if anchor != "free" and start > first + 0.01:
        return None
    if name[0] == "x":
        return None if axis.get("side") == "top" else "b"
    return "r" if axis.get("side") == "right" else "l"


def _labels(data, name: str, axis: dict) -> list[str]:
    """The tick labels axis `name` ('x', 'y2'...) draws, or generous stand-ins: its ticktext, its categories, or
    numbers at the ends of its range as Plotly would round them."""
    if axis.get("ticktext") is not None:
        return [str(t) for t in axis["ticktext"]]
    values = [v for trace in data for v in _values(trace, name)]
    strings = [str(v) for v in values if isinstance(v, str)]
    if strings or axis.get("type") == "category":
        return strings or [str(v) for v in values]
    numbers = np.asarray([v for v in values if v is not None], dtype=float)
    numbers = numbers[np.isfinite(numbers)]
    lo, hi = axis.get("range") or ((numbers.min(), numbers.max()) if numbers.size else (0, 1))
    if axis.get("type") == "log":
        lo, hi = (10**lo, 10**hi) if axis.get("range") else (lo, hi)
        return [f"{v:.0f}" for v in (lo, hi)] + ["0.01"]
    percent = "%" in (axis.get("tickformat") or "")
    suffix = (axis.get("ticksuffix") or "") + ("%" if percent else "")
    return [t + suffix for t in _rounded(float(lo), float(hi), 100 if percent else 1)]


def _rounded(lo: float, hi: float, scale: float) -> list[str]:
    """The labels at the ends of [lo, hi] at a step a little finer than Plotly's (so as many decimals or more)."""
    lo, hi = lo * scale, hi * scale
    span = abs(hi - lo) or abs(hi) or 1.0
    step = 10 ** math.floor(math.log10(span / 4))
    decimals = max(0, -math.floor(math.log10(step)))
    ends = (math.floor(lo / step) * step, math.ceil(hi / step) * step)
    return [f"{v:.{decimals}f}" for v in ends]


def _get(trace, *path):
    """What a trace (a plotly trace or a trace dict) holds at `path` ("marker", "colorbar"), None where unset; parts
    that are plotly objects come back as dicts."""
    value = trace
    for key in path:
        if value is None:
            return None
        value = value.get(key) if isinstance(value, dict) else getattr(value, key, None)
    return value.to_plotly_json() if hasattr(value, "to_plotly_json") else value


def _type(trace) -> str:
    return _get(trace, "type") or "scatter"  # a trace dict without a type is a scatter, as in Plotly


#: Trace types Plotly leaves out of the legend unless told (showlegend=True): their colour bar says what they show.
_OFF_THE_LEGEND = ("heatmap", "histogram2d", "contour")


def in_legend(trace) -> bool:
    """Whether Plotly lists `trace` (a trace or a trace dict) in a legend."""
    shown = _get(trace, "showlegend")
    return shown is True or (shown is None and _type(trace) not in _OFF_THE_LEGEND)


def _values(trace, name: str) -> list:
    """What `trace` puts along axis `name`: its x or y, positions when it has none, counts for a histogram's
    counted axis (at most one per value)."""
    letter = name[0]
    if (_get(trace, f"{letter}axis") or letter) != name:
        return []
    kind, given = _type(trace), _get(trace, letter)
    if kind == "histogram":
        binned = "x" if (_get(trace, "orientation") or "v") == "v" else "y"
        if letter != binned:
            n = len(_get(trace, binned))
            histnorm = _get(trace, "histnorm")
            return [0, 100 if histnorm == "percent" else 1 if histnorm else n]
    if given is None and kind in ("heatmap", "scatter", "bar"):
        z = _get(trace, "z") if kind == "heatmap" else None
        other = _get(trace, "y" if letter == "x" else "x")
        n = len(z[0] if letter == "x" else z) if z is not None and len(z) else len(other if other is not None else ())
        return list(range(n))
    return list(given) if given is not None and kind in ("heatmap", "scatter", "bar", "histogram", "box") else []


def _bars_room(data, layout: dict) -> int:
    """The room right of the plot the figure's vertical colour bars take (the furthest one's)."""
    bars, used = [], set()
    for t in data:
        kind = _type(t)
        if kind in ("heatmap", "histogram2d", "contour"):
            axis = _get(t, "coloraxis")
            used |= {axis} if axis else set()
            if not axis and _get(t, "showscale") is not False:
                bars.append(_get(t, "colorbar") or {})
        elif kind in ("scatter", "scattergl"):
            axis = _get(t, "marker", "coloraxis")
            used |= {axis} if axis else set()
            if _get(t, "marker", "showscale"):
                bars.append(_get(t, "marker", "colorbar") or {})
    bars += [(layout.get(c) or {}).get("colorbar") or {} for c in used if (layout.get(c) or {}).get("showscale", True)]
    return max((_bar_room(bar) for bar in bars), default=0)


def _bar_room(bar: dict) -> int:
    """One colour bar's room: a titled bar's (measured 91-117 px on the Head statistics, Compare and Query-key space
    charts), an untitled one's (83-91 px on 0-1 weights), more for a title of several lines or a bar
    moved right of its default place."""
    thin = _BAR_THICKNESS - (bar.get("thickness") or _BAR_THICKNESS)
    title = str(((bar.get("title") or {}).get("text")) or "")
    base = _TITLED_BAR_ROOM - thin / 8 if title else _BAR_ROOM
    beyond = max(0.0, (bar.get("x") or 1.02) - 1.02)
    return math.ceil(base + 16 * title.count("<br>") + 400 * beyond)


def _legend_room(data, layout: dict, size: float) -> int:
    """The room a legend in a column right of the plot (Plotly's default place) takes: its longest entry."""
    legend = layout.get("legend") or {}
    if legend.get("orientation", "v") != "v" or legend.get("x", 1.02) < 1 or layout.get("showlegend") is False:
        return 0
    names = [str(_get(t, "name")) for t in data if in_legend(t) and _get(t, "name")]
    shown = len(names) > 1 or layout.get("showlegend")
    longest = max(map(len, names), default=0)
    return math.ceil(longest * _CHAR_EM * size + 66) if names and shown else 0  # 66: its symbol and padding
