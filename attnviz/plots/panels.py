"""A grid of panels with shared axes as one layout dict: what Plotly's make_subplots builds, without its cost.

make_subplots, add_trace(row=, col=), update_xaxes and update_annotations validate and copy every axis, trace and
title once per call; for a 32-head layer (Llama-3.2-1B's shape) that was three quarters of the Heads page's work on
the server (1.3 s of 1.8 s). Building the layout as plain dicts and the Figure once (`common.finish` takes dicts) gives the
same figure: tests/plots/test_panel_grid.py compares this layout with make_subplots' own.
"""

from __future__ import annotations


def _axis(i: int) -> str:
    """The suffix of panel i's axes (1-based, row by row from the top left): "" for the first, then "2", "3"..."""
    return "" if i == 1 else str(i)


def _clamp(v: float) -> float:
    """make_subplots' rounding of a domain end that floating point put just outside [0, 1]."""
    return 0.0 if -0.01 < v < 0.0 else 1.0 if 1.0 < v < 1.01 else v


def panel_layout(rows: int, cols: int, titles, hspace: float, vspace: float) -> dict:
    """The layout make_subplots(rows, cols, subplot_titles=titles, shared_xaxes=True, shared_yaxes=True,
    horizontal_spacing=hspace, vertical_spacing=vspace) builds, less its template: every panel's axes with their
    domains and anchors, each column's x axes matching its bottom one and each row's y axes its first one (their tick
    labels hidden), and one annotation per non-empty title. The domains are computed in make_subplots' order of
    operations, so they are equal to the last bit. Panel i (row by row) draws on axes `panel_axes(i)`."""
    width, height = (1.0 - hspace * (cols - 1)) / cols, (1.0 - vspace * (rows - 1)) / rows
    layout, tops = {}, []
    for r in range(rows):  # r = 0: the top row
        below = rows - 1 - r
        y = sum([height] * below) + below * vspace
        for c in range(cols):
            x, i = sum([width] * c) + c * hspace, r * cols + c + 1
            x_axis = dict(anchor=f"y{_axis(i)}", domain=[x, x + width])
            y_axis = dict(anchor=f"x{_axis(i)}", domain=[_clamp(y), _clamp(y + height)])
            if r < rows - 1:  # shared x: every column matches its bottom panel
                x_axis |= dict(matches=f"x{_axis((rows - 1) * cols + c + 1)}", showticklabels=False)
            if c > 0:  # shared y: every row matches its first panel
                y_axis |= dict(matches=f"y{_axis(r * cols + 1)}", showticklabels=False)
            layout[f"xaxis{_axis(i)}"], layout[f"yaxis{_axis(i)}"] = x_axis, y_axis
            tops.append((sum(x_axis["domain"]) / 2.0, y_axis["domain"][1]))
    layout["annotations"] = [
        dict(
            y=y,
            xref="paper",
            x=x,
            yref="paper",
            text=text,
            showarrow=False,
            font=dict(size=16),
            xanchor="center",
            yanchor="bottom",
        )
        for text, (x, y) in zip(titles, tops)
        if text
    ]
    return layout


def panel_axes(i: int) -> dict:
    """The trace properties that put a trace on panel i (0-based, row by row) of `panel_layout`."""
    return dict(xaxis=f"x{_axis(i + 1)}", yaxis=f"y{_axis(i + 1)}")


def row_layout(titles, spacing: float) -> dict:
    """make_subplots(1, n, subplot_titles=titles, horizontal_spacing=spacing)'s layout: `panel_layout` of one row
    with every panel's own axes (not matched, its tick labels shown)."""
    layout = panel_layout(1, len(titles), titles, spacing, 0.0)
    for name in (k for k in layout if k.startswith(("xaxis", "yaxis"))):
        layout[name].pop("matches", None)
        layout[name].pop("showticklabels", None)
    return layout


def panel_axis_dicts(layout: dict, i: int) -> tuple[dict, dict]:
    """Panel i's (x axis, y axis) dicts in a `panel_layout` (0-based), to be filled in place."""
    names = panel_axes(i)
    return layout["xaxis" + names["xaxis"][1:]], layout["yaxis" + names["yaxis"][1:]]
