"""attnviz.gate with real threads: at most N through at once, the others served in arrival order and told where
they stand, a nested entry passing freely, a waiter that gives up leaving the queue (and the dashboard's message)."""

from __future__ import annotations

import threading
import time
import tomllib
from pathlib import Path

import pytest

from attnviz.ui.gate import Gate
from attnviz.ui.heavy import queued_message


def _crowd(gate: Gate, n: int, hold: float = 0.05):
    """n threads through the gate, each holding it `hold` s; (most inside at once, entry order, what waiters heard)."""
    inside, most, order, heard, done = [0], [0], [], [], []
    lock = threading.Lock()

    def work(i: int) -> None:
        with gate.through(lambda running, ahead: heard.append((i, running, ahead)), poll=0.01):
            with lock:
                inside[0] += 1
                most[0] = max(most[0], inside[0])
                order.append(i)
            time.sleep(hold)
            with lock:
                inside[0] -= 1
        done.append(i)

    threads = []
    for i in range(n):
        threads.append(threading.Thread(target=work, args=(i,)))
        threads[-1].start()
        deadline = time.monotonic() + 5  # arrive in order: thread i is in the gate or its queue before i + 1 starts
        while gate.running + gate.waiting + len(done) <= i and time.monotonic() < deadline:
            time.sleep(0.001)
        time.sleep(0.005)  # and the holders' ends apart, one slot freed at a time
    for t in threads:
        t.join(10)
    return most[0], order, heard


def test_at_most_n_run_at_once_and_the_rest_wait_in_order_told_how_many_are_busy():
    gate = Gate(2)
    most, order, heard = _crowd(gate, 6)
    assert most == 2 and sorted(order) == list(range(6))
    assert order[2:] == sorted(order[2:])  # the queue is first come, first served
    assert {i for i, _, _ in heard} >= {2, 3, 4, 5}  # everyone past the first two was told it waits
    assert all(1 <= running <= 2 for _, running, _ in heard)  # 1: a slot was just freed, its taker not yet in
    assert max(ahead for i, _, ahead in heard if i == 5) >= 1  # the last one heard others were ahead of it
    assert gate.running == 0 and gate.waiting == 0


def test_a_thread_already_through_passes_again_and_a_waiter_that_gives_up_leaves_the_queue():
    gate = Gate(1)
    with gate.through(), gate.through():  # one page's nested heavy steps: no deadlock with one slot
        assert gate.running == 1

        def give_up(running, ahead):
            raise KeyboardInterrupt  # as Streamlit's StopException ends a closed tab's run

        failed = []

        def impatient():
            try:
                with gate.through(give_up):
                    pass
            except KeyboardInterrupt:
                failed.append(True)

        t = threading.Thread(target=impatient)
        t.start()
        t.join(5)
        assert failed and gate.waiting == 0
    assert gate.running == 0
    most, _, _ = _crowd(gate, 3, hold=0.01)  # and the gate still serves everyone afterwards
    assert most == 1


def test_the_page_says_how_many_others_are_computing():
    assert queued_message(2, 1).startswith("Queued: 3 others are computing (2 running, 1 waiting before you)")
    assert queued_message(1, 0).startswith("Queued: 1 other is computing")
    with pytest.raises(ValueError):
        Gate(0)


def test_a_closed_tabs_session_is_kept_briefly():
    config = tomllib.loads((Path(__file__).parents[1] / ".streamlit" / "config.toml").read_text())
    assert config["server"]["disconnectedSessionTTL"] <= 30  # Streamlit's default keeps it 120 s
