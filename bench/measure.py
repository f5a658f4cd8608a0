"""Timing helpers (interleaved rounds, medians, per-round ratios) and a description of the machine."""

from __future__ import annotations

import gc
import os
import platform
import statistics
import time
from importlib import metadata

import torch


def interleaved(fns: dict, rounds: int, warmup: int = 1, clock=time.perf_counter) -> dict[str, list[float]]:
    """Seconds per call of each callable; every round runs all of them back to back, in alternating order."""
    for _ in range(warmup):
        for fn in fns.values():
            fn()
    times = {name: [] for name in fns}
    gc.disable()  # a collection inside one timed call would be charged to it alone: collect between rounds
    try:
        for r in range(rounds):
            gc.collect()
            for name in list(fns) if r % 2 == 0 else list(fns)[::-1]:
                t = clock()
                fns[name]()
                times[name].append(clock() - t)
    finally:
        gc.enable()
    return times


def one_thread_cpu(fns: dict, rounds: int, warmup: int = 1) -> dict[str, list[float]]:
    """As interleaved, with torch on one thread and the process's CPU time as the clock: the work itself, which
    waiting for a core that another process holds does not inflate (wall-clock times on a busy box do)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return interleaved(fns, rounds, warmup, clock=time.process_time)
    finally:
        torch.set_num_threads(threads)


def ms(times: list[float]) -> float:
    return 1000 * statistics.median(times)


def ratio(times: dict, num: str, den: str) -> float:
    """Median over rounds of num / den: each round's pair ran back to back, under the same load."""
    return statistics.median(a / b for a, b in zip(times[num], times[den]))


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "not installed"


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            return next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        return platform.processor() or "unknown CPU"


def load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def machine() -> dict:
    return {
        "cpu": _cpu_model(),
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
        **{name: _version(name) for name in ("transformers", "streamlit", "plotly", "playwright")},
        "load_start": load(),
    }
