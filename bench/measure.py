"""What every bench shares: interleaved timing and per-round ratios, the machine, a server as the container's."""

from __future__ import annotations

import contextlib
import gc
import os
import platform
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from importlib import metadata
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "out"
PACKAGES = ("torch", "transformers", "streamlit", "plotly", "playwright")  # their versions go with the results


def interleaved(fns: dict, rounds: int, warmup: int = 1, one_thread: bool = False) -> dict[str, list[float]]:
    """Seconds per call of each callable; every round runs all of them back to back, in alternating order.
    one_thread: torch on one thread, timed by the process's CPU time: the work itself, which waiting for a core that
    another process holds does not inflate (wall-clock times on a busy box do)."""
    threads, clock = torch.get_num_threads(), time.process_time if one_thread else time.perf_counter
    torch.set_num_threads(1 if one_thread else threads)
    times = {name: [] for name in fns}
    gc.disable()  # a collection inside one timed call would be charged to it alone: collect between rounds
    try:
        for r in range(-warmup, rounds):
            gc.collect()
            for name in list(fns) if r % 2 == 0 else list(fns)[::-1]:
                t = clock()
                fns[name]()
                times[name] += [clock() - t] if r >= 0 else []
    finally:
        gc.enable()
        torch.set_num_threads(threads)
    return times


ms = lambda times: 1000 * statistics.median(times)  # noqa: E731 - seconds per call -> median in milliseconds


def ratio(times: dict, num: str, den: str) -> float:
    """Median over rounds of num / den: each round's pair ran back to back, under the same load."""
    return statistics.median(a / b for a, b in zip(times[num], times[den]))


load = lambda: [round(x, 2) for x in os.getloadavg()]  # noqa: E731 - the load averages (1, 5, 15 min)


def machine() -> dict:
    with open("/proc/cpuinfo") as f:
        cpu = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), "unknown CPU")
    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    out = {"cpu": cpu, "cores": os.cpu_count(), "gpu": gpu, "python": platform.python_version()}
    out |= {name: _version(name) for name in PACKAGES}  # a GPU box may lack some
    return out | {"threads": torch.get_num_threads(), "load_start": load()}


def _version(name: str) -> str:
    """The version of `name` that an import finds (the first on sys.path: a GPU box's own copy can sit behind one
    put ahead of it), or "not installed"."""
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "not installed"


@contextlib.contextmanager
def served(log: Path, nice: int = 0, timeout: float = 120, root: Path = ROOT, env: dict | None = None):
    """scripts/serve.sh (hosted mode, as the container starts it) on a free loopback port: (the server, its URL),
    stopped on the way out. nice < 0 (root) puts it ahead of other work on a shared host; nice and the script exec,
    so the pid is the server's. `root`: the checkout to serve (another tree, to compare); `env`: more settings.
    proc.started is the perf_counter() of the start."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"  # the script runs `python`
    env = dict(os.environ, PATH=path, PORT=str(port), ATTNVIZ_ADDRESS="127.0.0.1", HF_HUB_OFFLINE="1") | (env or {})
    cmd = (["nice", "-n", str(nice)] if nice else []) + [str(root / "scripts" / "serve.sh")]
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("w") as out:
        started = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=root, env=env, stdout=out, stderr=subprocess.STDOUT)
        proc.started = started
    url, deadline = f"http://127.0.0.1:{port}", time.monotonic() + timeout
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            with contextlib.suppress(OSError), urllib.request.urlopen(url + "/_stcore/health", timeout=2) as r:
                if r.read().strip() == b"ok":
                    break
            time.sleep(0.3)
        else:
            raise RuntimeError(f"the server did not become healthy; see {log}")
        yield proc, url
    finally:
        proc.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(15)
        proc.kill()  # nothing where it has ended
