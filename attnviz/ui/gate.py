"""A gate that lets at most N threads through at once; the others wait in arrival order, told where they stand.

The dashboard serves every session from one process, one thread per script run. A few runs at the dashboard's
bounds (a long trace, the Masks page's three traces at 256 + 256 tokens) each hold a few hundred MB at their peak
and a core for tens of seconds: letting every session run them at once takes the replica past its memory, and
every session slows down together. The gate runs N of them and queues the rest (attnviz.ui.heavy says so on the
page). A thread already through passes again freely (one page's heavy steps nest), and a waiter whose `on_wait`
raises (Streamlit stops a closed tab's run at its next page update) leaves the queue.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager


class Gate:
    def __init__(self, slots: int):
        if slots < 1:
            raise ValueError(f"a gate needs at least one slot, not {slots}")
        self.slots = slots
        self.running = 0
        self._queue: deque[object] = deque()
        self._cond = threading.Condition()
        self._held = threading.local()

    @property
    def waiting(self) -> int:
        with self._cond:
            return len(self._queue)

    @contextmanager
    def through(self, on_wait: Callable[[int, int], None] | None = None, poll: float = 0.5) -> Iterator[None]:
        """Hold one slot for the block. While waiting, `on_wait(running, ahead)` is called about every `poll` s
        (outside the lock): how many runs hold a slot and how many waiters came before this one."""
        depth = getattr(self._held, "depth", 0)
        if depth == 0:
            self._enter(on_wait, poll)
        self._held.depth = depth + 1
        try:
            yield
        finally:
            self._held.depth = depth
            if depth == 0:
                with self._cond:
                    self.running -= 1
                    self._cond.notify_all()

    def _enter(self, on_wait, poll: float) -> None:
        ticket = object()
        with self._cond:
            self._queue.append(ticket)
        try:
            while True:
                with self._cond:
                    if self._queue[0] is ticket and self.running < self.slots:
                        self._queue.popleft()
                        self.running += 1
                        self._cond.notify_all()  # the next in line may fit too
                        return
                    running, ahead = self.running, self._queue.index(ticket)
                if on_wait is not None:
                    on_wait(running, ahead)
                with self._cond:
                    if not (self._queue[0] is ticket and self.running < self.slots):
                        self._cond.wait(poll)
        except BaseException:
            with self._cond:
                if ticket in self._queue:
                    self._queue.remove(ticket)
                self._cond.notify_all()
            raise
