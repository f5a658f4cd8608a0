"""A small thread-safe LRU cache bounded by bytes as well as entries.

Streamlit's caches bound entries only, and one 512-token trace of a 6 x 12 model holds ~150 MB
(scores and weights, float32), so a count-bounded cache could grow to gigabytes on a shared server.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Callable, Hashable, TypeVar

import numpy as np

V = TypeVar("V")


def nbytes(obj) -> int:
    """Bytes held by the numpy arrays of a dataclass-like object (its other fields are negligible)."""
    fields = getattr(obj, "__dataclass_fields__", None)
    values = (getattr(obj, f) for f in fields) if fields else [obj]
    return sum(v.nbytes for v in values if isinstance(v, np.ndarray))


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

    def __len__(self) -> int:
        return len(self._items)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self.bytes = 0
