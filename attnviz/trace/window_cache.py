"""Recently read windows of traces and results derived from them, kept beside the traces, never in them.

A page draws one window several times (the grid, the head up close and its hover, a note about the weights) and a
dashboard shares each trace between sessions: asking through here computes each window once. The record stays frozen
and cache-free; what is kept here goes when its trace goes (weak references), and at most RECENT windows per trace.

`remembered` functions of traces (a page's statistics, rollout, a comparison) keep their results for every session:
a second visit to the same view, or another visitor's, reads them instead of recomputing. They are held in one LRU
bounded in bytes (a quarter of the trace cache's budget), keyed by each trace's serial number (never reused, so a
dropped trace's results are never handed to another) and the arguments; arrays in a result are made read-only,
since every caller shares them.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import itertools
import threading
import weakref
from collections import OrderedDict

import numpy as np
import torch

from .. import settings
from ..attention import Stages
from ..cache import BytesLRU
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


_serials: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # trace -> its serial number
_counter = itertools.count()
_results: list[BytesLRU] = []  # made at first use, from the settings then


class _Unkeyable(Exception):
    pass


def _serial(trace: AttentionTrace) -> int:
    with _lock:
        if trace not in _serials:
            _serials[trace] = next(_counter)
        return _serials[trace]


def _frozen(value):
    """A hashable stand-in for an argument: a trace by its serial, an array by its digest, containers item by item."""
    if isinstance(value, AttentionTrace):
        return ("trace", _serial(value))
    if isinstance(value, np.ndarray):
        return ("array", value.dtype.str, value.shape, hashlib.blake2b(np.ascontiguousarray(value).data).digest())
    if isinstance(value, (list, tuple, range)):
        return (type(value).__name__, *map(_frozen, value))
    if isinstance(value, dict):
        return ("dict", *sorted((_frozen(k), _frozen(v)) for k, v in value.items()))
    try:
        hash(value)
    except TypeError:
        raise _Unkeyable from None
    return (type(value).__qualname__, value)  # typed: True, 1 and 1.0 are equal keys, yet not equal arguments


def _sealed_bytes(value, depth: int = 0) -> int:
    """Bytes held by a result's arrays and tensors (walked through containers and dataclasses), made read-only."""
    if depth > 4:
        return 0
    if isinstance(value, np.ndarray):
        value.flags.writeable = False
        return value.nbytes
    if isinstance(value, torch.Tensor):
        return value.numel() * value.element_size()
    if isinstance(value, dict):
        value = list(value.values())
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        value = [getattr(value, f.name) for f in dataclasses.fields(value)]
    if isinstance(value, (list, tuple)):
        return 64 + sum(_sealed_bytes(v, depth + 1) for v in value)
    return 64


def _cache() -> BytesLRU:
    with _lock:
        if not _results:
            _results.append(BytesLRU(settings.current().trace_cache_bytes // 4, max_entries=256, size=_sealed_bytes))
        return _results[0]


def remembered(fn):
    """`fn(trace, ...)`'s result kept for every caller with the same traces and arguments (compared by value;
    arguments that cannot be compared so, e.g. a model, make a call that is never kept)."""

    @functools.wraps(fn)
    def kept(*args, **kwargs):
        try:
            key = (fn.__module__, fn.__qualname__, _frozen(args), _frozen(kwargs))
        except _Unkeyable:
            return fn(*args, **kwargs)
        return _cache().get_or_compute(key, lambda: fn(*args, **kwargs))

    return kept


def clear_results() -> None:
    """Forget every remembered result (tests that count computations start from here)."""
    _cache().clear()
