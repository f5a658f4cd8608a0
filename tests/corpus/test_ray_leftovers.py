"""A local Ray start that fails half-way (its raylet timing out on a loaded machine) leaves gcs_server, dashboard and
monitor processes that `ray.shutdown()` does not reach: the start ends every process it left below this one."""

import subprocess
import sys
import time
from pathlib import Path

import pytest

from attnviz.corpus.ray_engine import descendants, end_processes, start_runtime
from attnviz.errors import InputError

# A child that ignores SIGTERM and has a child of its own: ending it takes the SIGKILL step and the whole tree.
STUBBORN = (
    "import signal, subprocess, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
    "subprocess.Popen(['sleep', '60']); print('ready', flush=True); time.sleep(60)"
)


def test_processes_a_failed_start_left_are_ended_with_their_children():
    before = descendants()
    polite = subprocess.Popen(["sleep", "60"])
    stubborn = subprocess.Popen([sys.executable, "-c", STUBBORN], stdout=subprocess.PIPE, text=True)
    assert stubborn.stdout.readline().strip() == "ready"
    left = descendants() - before
    assert {polite.pid, stubborn.pid} < left and len(left) == 3  # the stubborn one's sleep is found below it

    t0 = time.monotonic()
    end_processes(left, grace_s=0.5)
    assert not (descendants() & left)
    assert not any(Path(f"/proc/{p.pid}").exists() for p in (polite, stubborn))  # ended and reaped, no zombie
    assert time.monotonic() - t0 < 5
    assert not descendants() - before  # nothing of the start is left


class HalfStartingRay:
    """What a local `ray.init` does when its raylet never registers: it has started the node's processes, then
    raises; `ray.shutdown()` knows nothing of a node that did not finish starting."""

    def __init__(self):
        self.started: list[subprocess.Popen] = []

    def init(self, **_):
        self.started.append(subprocess.Popen(["sleep", "60"]))
        raise Exception("The current node timed out during startup.")

    def shutdown(self):
        pass


def test_a_start_that_fails_twice_leaves_no_process_and_says_why(monkeypatch):
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    before, ray = descendants(), HalfStartingRay()
    with pytest.raises(InputError, match="Could not start a local Ray runtime: The current node timed out"):
        start_runtime(ray, workers=2)
    assert len(ray.started) == 2  # tried twice
    assert not descendants() - before  # nothing of the start is left
