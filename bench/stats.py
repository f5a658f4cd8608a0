"""Timing and memory primitives shared by every bench.

The machine is shared, so absolute times drift by 2x within minutes. Everything that is compared is
therefore measured *interleaved* (A, B, A, B, ... in alternating order after a warm-up), and a ratio is
reported two ways: the ratio of the medians and the median of the per-round ratios (each round's A and B
ran back to back under the same load). Medians come with min and max.
"""

from __future__ import annotations

import gc
import os
import statistics
import time
from dataclasses import asdict, dataclass


@dataclass
class Summary:
    """Median, min and max of repeated measurements (seconds, bytes, ... as the caller says)."""

    median: float
    min: float
    max: float
    n: int

    @classmethod
    def of(cls, values) -> "Summary":
        values = [float(v) for v in values]
        return cls(statistics.median(values), min(values), max(values), len(values))

    def to_dict(self) -> dict:
        return asdict(self)


def timed(fn, clock=time.perf_counter) -> float:
    t = clock()
    fn()
    return clock() - t


def compare(fns: dict, *, warmup: int = 3, repeat: int = 20, clock=time.perf_counter) -> dict:
    """Time each callable of `fns` `repeat` times, interleaved, after `warmup` calls of each.

    Returns {name: Summary of seconds, ..., "ratios": {name: per-round ratio Summary vs the first name}}.
    The order inside a round alternates (ABC, CBA, ...) so no function always runs right after another.
    clock: time.perf_counter (wall) or time.thread_time (this thread's CPU time: with torch on one
    thread, the work itself, unaffected by waiting for a core that another process holds).
    """
    names = list(fns)
    for _ in range(warmup):
        for n in names:
            fns[n]()
    times = {n: [] for n in names}
    gc_was = gc.isenabled()
    gc.disable()  # a collection landing inside one timed call would be charged to it alone
    try:
        for r in range(repeat):
            order = names if r % 2 == 0 else names[::-1]
            for n in order:
                times[n].append(timed(fns[n], clock))
            gc.collect()
    finally:
        if gc_was:
            gc.enable()
    out = {n: Summary.of(times[n]) for n in names}
    base = names[0]
    out["ratios"] = {n: Summary.of([a / b for a, b in zip(times[n], times[base])]) for n in names[1:]}
    out["raw"] = times
    return out


def ratio_of_medians(res: dict, name: str, base: str) -> float:
    return res[name].median / res[base].median


# --- memory ------------------------------------------------------------------------------------------


def _status(pid: int | str = "self") -> dict:
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(("VmRSS", "VmHWM")):
                key, val = line.split(":", 1)
                out[key] = int(val.split()[0]) * 1024
    return out


def rss(pid: int | str = "self") -> int:
    """Resident set size in bytes (psutil when available, else /proc/<pid>/status VmRSS)."""
    try:
        import psutil

        return int(psutil.Process(os.getpid() if pid == "self" else int(pid)).memory_info().rss)
    except ImportError:
        return _status(pid)["VmRSS"]


def reset_peak() -> bool:
    """Reset this process's peak RSS (VmHWM) to its current RSS; False if the kernel does not allow it."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def peak_rss() -> int:
    return _status()["VmHWM"]


def peak_growth(fn) -> tuple[int, object]:
    """(bytes by which the peak RSS rose above the RSS before the call, fn's result)."""
    gc.collect()
    reset_peak()
    before = _status()["VmRSS"]
    result = fn()
    return peak_rss() - before, result


MB = 1024 * 1024


class torch_threads:
    """Context manager: run torch on n threads inside, restore the previous count after."""

    def __init__(self, n: int):
        self.n = n

    def __enter__(self):
        import torch

        self.old = torch.get_num_threads()
        torch.set_num_threads(self.n)
        return self

    def __exit__(self, *exc):
        import torch

        torch.set_num_threads(self.old)
