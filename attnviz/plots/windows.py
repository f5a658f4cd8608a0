"""The token window of a token-by-token figure: which queries (rows) and which keys (columns) it draws.

A float32 heatmap of T x T tokens costs about 5.5 * T^2 bytes of JSON and seconds to draw at a few hundred tokens, so
long texts are drawn through a window of at most MAX_SHOWN tokens per axis. Queries and keys are chosen apart: late
queries can keep the first keys (often an attention sink) in view.
"""

from __future__ import annotations

from typing import NamedTuple

MAX_SHOWN = 128  # tokens per axis in the grid and the single head (the caller can move the window)


class Window(NamedTuple):
    """What a token-by-token figure draws: [start, stop) of the queries (rows) and of the keys (columns)."""

    queries: tuple[int, int]
    keys: tuple[int, int]


def axis_ranges(token_range) -> tuple:
    """(query range, key range) of a `token_range`: one (start, stop) for both axes, a Window, or None."""
    if token_range is None:
        return None, None
    if isinstance(token_range[0], (tuple, list)):
        return tuple(token_range[0]), tuple(token_range[1])
    return tuple(token_range), tuple(token_range)


def window(n_tokens: int, token_range=None, limit: int = MAX_SHOWN) -> tuple[int, int]:
    """The [start, stop) token window to draw: the caller's range clipped to the text and to `limit` tokens."""
    if token_range is None:
        return 0, min(n_tokens, limit)
    start, stop = (int(v) for v in token_range)
    start = min(max(0, start), max(0, n_tokens - 1))
    stop = min(max(start + 1, stop), n_tokens, start + limit)
    return start, stop


def windows(trace, token_range=None) -> tuple[tuple[int, int], tuple[int, int]]:
    """(query window, key window) of a `token_range` (see axis_ranges), each clipped to its own tokens
    (cross-attention has fewer or more keys than queries)."""
    queries, keys = axis_ranges(token_range)
    return window(trace.n_tokens, queries), window(trace.n_keys, keys)


def range_note(n_queries: int, n_keys: int, queries: tuple[int, int], keys: tuple[int, int]) -> str:
    """' · tokens a–b of n' for a window (queries and keys alike), ' · queries a–b, keys c–d of n' when they differ;
    '' for the whole text."""
    if queries == (0, n_queries) and keys == (0, n_keys):
        return ""
    if queries == keys and n_queries == n_keys:
        return f" · tokens {queries[0]}–{queries[1] - 1} of {n_queries:,}"
    return f" · queries {queries[0]}–{queries[1] - 1}, keys {keys[0]}–{keys[1] - 1} of {n_keys:,}"
