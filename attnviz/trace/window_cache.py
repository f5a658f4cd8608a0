"""Recently read windows of traces and small results derived from them, kept beside the traces, never in them.

A page draws one window several times (the grid, the head up close and its hover, a note about the weights) and a
dashboard shares each trace between sessions: asking through here computes each window once. The record stays frozen
and cache-free; what is kept here goes when its trace goes (weak references), and at most RECENT windows per trace.
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict

from ..attention import Stages
from .record import AttentionTrace

RECENT = 2  # windows kept per trace: a page switching stages or heads over one window does not recompute
_lock = threading.Lock()
_windows: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # trace -> OrderedDict(window -> Stages)
_memos: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # trace -> {key: small result}


def _key(trace: AttentionTrace, layer, heads, queries, keys) -> tuple:
    """One key per window: a full window and None (every query or key) are the same window."""
    heads = heads if heads is None or isinstance(heads, int) else tuple(int(h) for h in heads)
    queries = None if queries is None or tuple(queries) == (0, trace.n_tokens) else tuple(queries)
    keys = None if keys is None or tuple(keys) == (0, trace.n_keys) else tuple(keys)
    return int(layer), heads, queries, keys


def stages(trace: AttentionTrace, layer: int, heads=None, queries=None, keys=None) -> Stages:
    """`trace.stages(layer, heads, queries, keys)`, kept among the RECENT windows this trace was last asked for."""
    key = _key(trace, layer, heads, queries, keys)
    with _lock:
        recent = _windows.setdefault(trace, OrderedDict())
        if key in recent:
            recent.move_to_end(key)
            return recent[key]
    out = trace.stages(layer, heads, queries, keys)
    with _lock:
        recent[key] = out
        while len(recent) > RECENT:
            recent.popitem(last=False)
    return out


def memo(trace: AttentionTrace, key, compute):
    """A small result derived from `trace` (a pooled overview, per-head statistics), computed once per trace."""
    with _lock:
        kept = _memos.setdefault(trace, {})
        if key in kept:
            return kept[key]
    value = compute()
    with _lock:
        return kept.setdefault(key, value)
