"""Heavy page work, at most ATTNVIZ_HEAVY_RUNS sessions at once (attnviz.gate); a session waiting says so.

Trace computations of long texts, the Masks experiment at its bounds and opening an uploaded trace each hold a few
hundred MB at their peak: run together by every session they would take a replica past its memory. Light work (a
short sentence, a cached trace) never waits. A waiting session shows how many others are computing and goes on by
itself; its page updates while it waits are also where Streamlit stops a closed tab's run, so it leaves the queue.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

import streamlit as st

from .. import settings
from .gate import Gate

LIGHT_TOKENS = 128  # at most this many tokens (queries + padding): milliseconds of work, never queued
_gates: dict[int, Gate] = {}
_lock = threading.Lock()


def gate() -> Gate:
    """The process-wide gate (one per ATTNVIZ_HEAVY_RUNS value, so a changed setting takes effect)."""
    slots = settings.current().heavy_runs
    with _lock:
        return _gates.setdefault(slots, Gate(slots))


def queued_message(running: int, ahead: int) -> str:
    others = running + ahead
    return (
        f"Queued: {others} other{'s' if others != 1 else ''} {'are' if others != 1 else 'is'} computing "
        f"({running} running, {ahead} waiting before you). This server runs {gate().slots} long computations at "
        "once so that it stays fast for everyone; this page goes on by itself when one finishes."
    )


@contextmanager
def heavy(when: bool = True) -> Iterator[None]:
    """Run the block through the gate when `when` (the work is heavy); meanwhile say it is queued, if it is."""
    if not when:
        yield
        return
    box = None

    def told(running: int, ahead: int) -> None:
        nonlocal box
        box = box or st.empty()
        box.info(queued_message(running, ahead), icon=":material/hourglass_top:")

    with gate().through(told):
        if box is not None:
            box.empty()
        yield
