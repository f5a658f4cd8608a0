"""A figure's JSON drawn as SVG: traces, ticks, titles, annotations, shapes, legend and colour bar."""

from __future__ import annotations

import numpy as np

from .axes import Axes, Axis, cell_centres, positions
from .pieces import PALETTE, array, colour_cells, nice_ticks, number, numbers, png, rgb, shrink, text_lines, text_of

WIDTH = 760  # px: a notebook column
MARGIN = {"l": 120, "r": 80, "t": 70, "b": 100}  # room for token tick labels, titles, a legend and a colour bar
MAX_TICKS = 40
MAX_MARKS = 2_000  # bars or markers of one trace; past this a picture is only ink
DASH = {"dot": "2,3", "dash": "6,4", "dashdot": "6,3,2,3", "longdash": "10,4"}


def figure_svg(spec: dict, width: int = WIDTH) -> str:
    """The SVG of a figure's JSON ({data, layout}), `width` px wide and as tall as the figure."""
    layout, data = spec.get("layout") or {}, [t for t in spec.get("data") or [] if t.get("visible", True) is True]
    height = int(layout.get("height") or 450)
    axes = Axes(data, layout, width, height, MARGIN)
    parts = [f'<rect width="{width}" height="{height}" fill="#ffffff"/>']
    for i, trace in enumerate(data):
        parts += DRAW.get(trace.get("type", "scatter"), lambda *_: [])(trace, axes, PALETTE[i % len(PALETTE)])
    parts += ticks(axes) + notes(layout, axes) + legend(data, width) + colour_bar(data, axes)
    title = layout.get("title")
    title = title.get("text") if isinstance(title, dict) else title
    if title:
        parts.append(f'<text x="8" y="18" font-size="14" font-weight="bold">{text_of(title)}</text>')
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
        f'font-family="sans-serif" font-size="11" fill="#262730">{"".join(parts)}</svg>'
    )


def static_html(spec: dict) -> str:
    """The figure as HTML that runs nothing: its SVG and a line on where it is interactive."""
    return (
        f'<div class="attnviz-static">{figure_svg(spec)}<div style="font-size:11px;color:#555">'
        "A static picture: open the notebook in JupyterLab or VS Code (or run the cell) to hover and zoom.</div></div>"
    )


def heatmap(trace: dict, axes: Axes, _colour) -> list[str]:
    z = numbers(trace.get("z"))
    if z.ndim != 2 or not z.size:
        return []
    xa, ya = axes.axis(trace.get("xaxis", "x")), axes.axis(trace.get("yaxis", "y"))
    (x0, x1), (y0, y1) = _edges(trace, "x", z.shape[1], xa), _edges(trace, "y", z.shape[0], ya)
    px0, px1, py0, py1 = axes.px(xa.name, x0), axes.px(xa.name, x1), axes.px(ya.name, y0), axes.px(ya.name, y1)
    z = z[:, ::-1] if px0 > px1 else z
    z = z[::-1] if py0 > py1 else z  # the picture's first row is at the top: row 0 drawn lower is flipped
    finite = z[np.isfinite(z)]
    zmin = float(trace.get("zmin", finite.min() if finite.size else 0))
    zmax = float(trace.get("zmax", finite.max() if finite.size else 1))
    cells = png(colour_cells(shrink(z), trace.get("colorscale"), zmin, zmax))
    x, y, w, h = min(px0, px1), min(py0, py1), abs(px1 - px0), abs(py1 - py0)
    return [
        f'<image x="{x:.1f}" y="{y:.1f}" width="{w:.1f}" height="{h:.1f}" preserveAspectRatio="none" '
        f'style="image-rendering:pixelated" href="data:image/png;base64,{cells}"/>'
    ]


def _edges(trace: dict, letter: str, n: int, axis: Axis) -> tuple[float, float]:
    centres = cell_centres(trace, letter, n, axis)
    step = (centres[-1] - centres[0]) / (n - 1) if n > 1 else 1.0
    return centres[0] - step / 2, centres[-1] + step / 2


def bar(trace: dict, axes: Axes, colour) -> list[str]:
    xa, ya = trace.get("xaxis", "x"), trace.get("yaxis", "y")
    across, along = ("x", "y") if trace.get("orientation", "v") == "v" else ("y", "x")
    names = {"x": xa, "y": ya}
    pos = positions(trace.get(across), axes.axis(names[across]))
    size = numbers(trace.get(along)).ravel()
    if trace.get(across) is None:
        pos = np.arange(len(size), dtype=float)
    width = np.broadcast_to(_bar_width(trace, pos), pos.shape)
    fill = _fill(trace, colour)
    out = []
    for p, s, w in list(zip(pos, size, width))[:MAX_MARKS]:
        if not (np.isfinite(p) and np.isfinite(s)):
            continue
        a = sorted([axes.px(names[across], p - w / 2), axes.px(names[across], p + w / 2)])
        b = sorted([axes.px(names[along], 0.0), axes.px(names[along], s)])
        x, y, w_, h_ = (
            (a[0], b[0], a[1] - a[0], b[1] - b[0]) if across == "x" else (b[0], a[0], b[1] - b[0], a[1] - a[0])
        )
        out.append(f'<rect x="{x:.1f}" y="{y:.1f}" width="{w_:.1f}" height="{h_:.1f}" {fill}/>')
    return out


def _bar_width(trace: dict, pos: np.ndarray):
    if trace.get("width") is not None:
        return numbers(trace.get("width")) if isinstance(trace["width"], list | dict) else float(trace["width"])
    gaps = np.diff(np.sort(pos[np.isfinite(pos)]))
    return 0.8 * (gaps[gaps > 0].min() if (gaps > 0).any() else 1.0)


def _fill(trace: dict, colour) -> str:
    marker = trace.get("marker") or {}
    c = marker.get("color") if isinstance(marker.get("color"), str) else colour
    r, g, b, a = rgb(c)
    return f'fill="rgb({r},{g},{b})" fill-opacity="{a * float(trace.get("opacity", 1)):.2f}"'


def scatter(trace: dict, axes: Axes, colour) -> list[str]:
    xa, ya = trace.get("xaxis", "x"), trace.get("yaxis", "y")
    ys = positions(trace.get("y"), axes.axis(ya))
    xs = positions(trace.get("x"), axes.axis(xa)) if trace.get("x") is not None else np.arange(len(ys), dtype=float)
    n = min(len(xs), len(ys))
    px = np.array([axes.px(xa, v) for v in xs[:n]])
    py = np.array([axes.px(ya, v) for v in ys[:n]])
    mode = trace.get("mode") or ("lines+markers" if n < 20 else "lines")
    line = trace.get("line") or {}
    stroke = line.get("color") or (trace.get("marker") or {}).get("color") or colour
    stroke = stroke if isinstance(stroke, str) else colour
    out = []
    if "lines" in mode:
        dash = DASH.get(line.get("dash", "solid"), "")
        for run in _runs(np.isfinite(px) & np.isfinite(py)):
            points = " ".join(f"{px[i]:.1f},{py[i]:.1f}" for i in run)
            r, g, b, a = rgb(stroke)
            out.append(
                f'<polyline points="{points}" fill="none" stroke="rgb({r},{g},{b})" stroke-opacity="{a}" '
                f'stroke-width="{float(line.get("width", 2)):.1f}" stroke-dasharray="{dash}"/>'
            )
    if "markers" in mode:
        fill = _fill(trace, stroke)
        if 'fill-opacity="0.00"' not in fill:
            ok = np.isfinite(px) & np.isfinite(py)
            out += [
                f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3" {fill}/>' for x, y in list(zip(px[ok], py[ok]))[:MAX_MARKS]
            ]
    return out


def _runs(ok: np.ndarray) -> list[list[int]]:
    """Index runs of finite points (a NaN breaks a line, as in plotly)."""
    runs, run = [], []
    for i, good in enumerate(ok):
        if good:
            run.append(i)
        elif run:
            runs, run = runs + [run], []
    return [r for r in runs + [run] if len(r) > 1]


DRAW = {"heatmap": heatmap, "bar": bar, "scatter": scatter, "scattergl": scatter}


def ticks(axes: Axes) -> list[str]:
    """Tick labels and axis titles of every axis (x below its plot, y to its left)."""
    out = []
    for axis in list(axes.axes.values()):
        letter, spec = axis.name[0], axis.spec
        anchor = spec.get("anchor") or ("y" if letter == "x" else "x")
        d = axes.axis(anchor).domain if anchor in axes.axes else (0.0, 1.0)
        edge = axes.paper("y" if letter == "x" else "x", d[0])
        labels = _labels(axis) if spec.get("showticklabels", True) else []
        slant = letter == "x" and (spec.get("tickangle") not in (None, 0, "auto") or len(labels) > 8)
        for value, label in labels:
            p = axes.px(axis.name, value)
            if not np.isfinite(p):
                continue
            if letter == "y":
                out.append(f'<text x="{edge - 4:.1f}" y="{p + 3:.1f}" text-anchor="end" font-size="9">{label}</text>')
            elif slant:
                out.append(
                    f'<text transform="translate({p:.1f},{edge + 10:.1f}) rotate(-60)" text-anchor="end" '
                    f'font-size="9">{label}</text>'
                )
            else:
                out.append(f'<text x="{p:.1f}" y="{edge + 13:.1f}" text-anchor="middle" font-size="9">{label}</text>')
        title = (spec.get("title") or {}).get("text") if isinstance(spec.get("title"), dict) else spec.get("title")
        if title:
            lo, hi = axes.paper(letter, axis.domain[0]), axes.paper(letter, axis.domain[1])
            mid = (lo + hi) / 2
            if letter == "x":
                out.append(
                    f'<text x="{mid:.1f}" y="{edge + (78 if slant else 30):.1f}" text-anchor="middle">{text_of(title)}</text>'
                )
            else:
                out.append(
                    f'<text transform="translate({max(edge - 100, 12):.1f},{mid:.1f}) rotate(-90)" '
                    f'text-anchor="middle">{text_of(title)}</text>'
                )
    return out


def _labels(axis: Axis) -> list[tuple[float, str]]:
    spec = axis.spec
    if spec.get("tickvals") is not None:
        vals = array(spec["tickvals"]).tolist()
        texts = array(spec.get("ticktext")).tolist() if spec.get("ticktext") is not None else vals
        pairs = [(axis.position(v), text_of(t)) for v, t in zip(vals, texts)]
    elif axis.categories:
        pairs = [(float(i), text_of(c)) for c, i in axis.categories.items()]
    else:
        return [(v, number(10**v if axis.log else v)) for v in nice_ticks(*axis.span)]
    step = max(1, -(-len(pairs) // MAX_TICKS))
    return pairs[::step]


def notes(layout: dict, axes: Axes) -> list[str]:
    """Annotations (subplot titles, notes in a corner) and line or box shapes."""
    out = []
    for shape in layout.get("shapes") or []:
        if shape.get("type") in ("line", "rect"):
            x0, x1 = (axes.ref("x", shape.get("xref"), shape.get(k, 0)) for k in ("x0", "x1"))
            y0, y1 = (axes.ref("y", shape.get("yref"), shape.get(k, 0)) for k in ("y0", "y1"))
            line = shape.get("line") or {}
            r, g, b, _ = rgb(line.get("color", "#444444"))
            style = f'stroke="rgb({r},{g},{b})" stroke-dasharray="{DASH.get(line.get("dash"), "")}" fill="none"'
            if shape["type"] == "line":
                out.append(f'<line x1="{x0:.1f}" y1="{y0:.1f}" x2="{x1:.1f}" y2="{y1:.1f}" {style}/>')
            else:
                out.append(
                    f'<rect x="{min(x0, x1):.1f}" y="{min(y0, y1):.1f}" width="{abs(x1 - x0):.1f}" '
                    f'height="{abs(y1 - y0):.1f}" {style}/>'
                )
    for note in layout.get("annotations") or []:
        x, y = axes.ref("x", note.get("xref"), note.get("x", 0.5)), axes.ref("y", note.get("yref"), note.get("y", 0.5))
        lines = [s for s in text_lines(note.get("text")) if s]
        size = float((note.get("font") or {}).get("size") or 12)
        anchor = {"left": "start", "right": "end"}.get(note.get("xanchor"), "middle")
        first = {"bottom": y - 3 - (len(lines) - 1) * size * 1.2, "top": y + size}.get(
            note.get("yanchor"), y + size * 0.35 - (len(lines) - 1) * size * 0.6
        )
        spans = "".join(f'<tspan x="{x:.1f}" y="{first + i * size * 1.2:.1f}">{s}</tspan>' for i, s in enumerate(lines))
        out.append(f'<text text-anchor="{anchor}" font-size="{size:g}">{spans}</text>')
    return out


def legend(data: list, width: int) -> list[str]:
    """Named traces in one row under the title (plotly's legend is interactive; this only says which is which)."""
    seen, out, x = set(), [], 8.0
    for i, trace in enumerate(data):
        name = trace.get("name")
        if not name or name in seen or trace.get("type") == "heatmap" or trace.get("showlegend") is not True:
            continue
        seen.add(name)
        colour = (trace.get("line") or {}).get("color") or (trace.get("marker") or {}).get("color")
        r, g, b, _ = rgb(colour if isinstance(colour, str) else PALETTE[i % len(PALETTE)])
        label = text_of(name)
        if x + 30 + 6 * len(label) > width:
            break
        dash = DASH.get((trace.get("line") or {}).get("dash"), "")
        out.append(
            f'<line x1="{x:.1f}" y1="34" x2="{x + 20:.1f}" y2="34" stroke="rgb({r},{g},{b})" stroke-width="3" '
            f'stroke-dasharray="{dash}"/><text x="{x + 24:.1f}" y="38">{label}</text>'
        )
        x += 34 + 6 * len(label)
    return out


def colour_bar(data: list, axes: Axes) -> list[str]:
    """The first heatmap's colour scale as a bar at the right, its ends and its title."""
    trace = next((t for t in data if t.get("type") == "heatmap" and t.get("showscale", True)), None)
    if trace is None:
        return []
    finite = numbers(trace.get("z"))
    finite = finite[np.isfinite(finite)]
    lo = float(trace.get("zmin", finite.min() if finite.size else 0))
    hi = float(trace.get("zmax", finite.max() if finite.size else 1))
    ramp = png(colour_cells(np.linspace(hi, lo, 64)[:, None], trace.get("colorscale"), lo, hi))
    x, top, bottom = axes.right + 14, axes.top, axes.bottom
    title = text_of(((trace.get("colorbar") or {}).get("title") or {}).get("text", ""))
    return [
        f'<image x="{x}" y="{top}" width="12" height="{bottom - top}" preserveAspectRatio="none" '
        f'href="data:image/png;base64,{ramp}"/>',
        f'<text x="{x + 16}" y="{top + 9}" font-size="9">{number(hi)}</text>',
        f'<text x="{x + 16}" y="{bottom}" font-size="9">{number(lo)}</text>',
        f'<text transform="translate({x + 30},{(top + bottom) / 2:.1f}) rotate(90)" text-anchor="middle">{title}</text>',
    ]
