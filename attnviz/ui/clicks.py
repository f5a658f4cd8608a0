"""Clicks on charts: which key, head or point a click event names.

A click on a chart's point (see plots.clickable) reaches the chart's on_select callback as
st.session_state[its key] = {"selection": {"points": [...]}}, st.plotly_chart's selection form (ui.plotly_view); every
click is an event of its own, the same point clicked twice included. Whatever the browser sent is checked here: a
crafted event gives None, never an error.
"""

from __future__ import annotations


def clicked_points(event) -> list:
    """The points of a Streamlit plotly selection event ({"selection": {"points": [...]}}), [] for anything else."""
    try:
        points = event["selection"]["points"]
    except (KeyError, TypeError, IndexError):
        return []
    return list(points) if isinstance(points, (list, tuple)) else []


def selected_tile(event) -> tuple[int, int] | None:
    """(layer, head) from a Streamlit plotly selection event on the overview, or None if nothing usable.

    Expects {"selection": {"points": [{"customdata": [layer, head], ...}], ...}} (dicts or Streamlit's
    attribute dicts); takes the first point that carries a [layer, head] pair. Customdata sent as a numpy
    typed array comes back from the browser as {"0": layer, "1": head}, so that form is accepted too.
    """
    for point in clicked_points(event):
        data = point.get("customdata") if hasattr(point, "get") else None
        if hasattr(data, "get"):
            data = [data.get("0"), data.get("1")]
        if isinstance(data, (list, tuple)) and len(data) >= 2:
            try:
                return int(data[0]), int(data[1])
            except (TypeError, ValueError):
                continue
    return None


def selected_key(event, n_keys: int) -> int | None:
    """The key (column) of the cell a click selected on a token heatmap's click targets, or None.

    The targets sit at x = key index (positional axes), so the first point's x names it; anything else (no point,
    a non-number, a key outside 0..n_keys-1, as a crafted event could send) gives None."""
    for point in clicked_points(event):
        x = point.get("x") if hasattr(point, "get") else None
        if isinstance(x, (int, float)) and not isinstance(x, bool) and float(x).is_integer() and 0 <= x < n_keys:
            return int(x)
    return None


def selected_head(event, n_layer: int, n_head: int) -> tuple[int, int] | None:
    """(layer, head) of the square a click selected on a layer x head grid (customdata [layer, head], read by
    selected_tile), or None when there is none or it lies outside the model's layers and heads."""
    tile = selected_tile(event)
    if tile is None or not (0 <= tile[0] < n_layer and 0 <= tile[1] < n_head):
        return None
    return tile


def toggle_head(picked: list[str], head_id: str, most: int) -> tuple[list[str], bool]:
    """`picked` with `head_id` removed if it is there, else added at the end; (the new list, False) or, when adding
    would pass `most`, (`picked` unchanged, True)."""
    if head_id in picked:
        return [p for p in picked if p != head_id], False
    if len(picked) >= most:
        return list(picked), True
    return [*picked, head_id], False


def point_in(point, n_queries: int, n_keys: int) -> tuple[bool, int] | None:
    """(is a key, token position) when `point` is a (0 query / 1 key, position) pair inside the trace, else None."""
    if not isinstance(point, (list, tuple)) or len(point) != 2 or point[0] not in (0, 1):
        return None
    is_key, position = bool(point[0]), point[1]
    return (is_key, int(position)) if 0 <= position < (n_keys if is_key else n_queries) else None


def selected_point(event, n_queries: int, n_keys: int) -> tuple[bool, int] | None:
    """(is a key, token position) of the point a click selected on the query-key space (customdata [0 for a query or
    1 for a key, position], read as selected_tile reads a pair), or None for anything else."""
    return point_in(selected_tile(event), n_queries, n_keys)
