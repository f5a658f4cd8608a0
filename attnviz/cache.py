"""A small thread-safe LRU cache bounded by bytes as well as entries.

Streamlit's caches bound entries only; traces of long texts on big models (and the layers they have computed)
differ in size by orders of magnitude, so the dashboard's shared trace cache is bounded by bytes.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import TypeVar

V = TypeVar("V")


def nbytes(obj) -> int:
    """Bytes an object holds: its own `nbytes` (numpy arrays, AttentionTrace), else 0."""
    return int(getattr(obj, "nbytes", 0) or 0)


class BytesLRU:
    def __init__(self, max_bytes: int, max_entries: int = 64, size: Callable[[object], int] = nbytes):
        self.max_bytes, self.max_entries, self.size = max_bytes, max_entries, size
        self._items: OrderedDict[Hashable, tuple[object, int]] = OrderedDict()
        self._lock = threading.Lock()
        self.bytes = 0

    def get_or_compute(self, key: Hashable, compute: Callable[[], V]) -> V:
        with self._lock:
            if key in self._items:
                self._items.move_to_end(key)
                return self._items[key][0]
        value = compute()  # outside the lock: sessions computing different keys run in parallel
        n = self.size(value)
        with self._lock:
            if key not in self._items and n <= self.max_bytes:
                self._items[key] = (value, n)
                self.bytes += n
                while self.bytes > self.max_bytes or len(self._items) > self.max_entries:
                    _, (_, old) = self._items.popitem(last=False)
                    self.bytes -= old
        return value

    def __contains__(self, key: Hashable) -> bool:
        with self._lock:
            return key in self._items

    def __len__(self) -> int:
        return len(self._items)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self.bytes = 0
