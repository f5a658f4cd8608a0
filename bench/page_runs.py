"""The server's run of a page, in-process (AppTest, one session, the bundled model), this checkout against another.

    BENCH_BASELINE=/path/to/another/checkout python -m bench.page_runs [ROUNDS]

Rows (milliseconds, the median over `n` runs of one process): Heads after a new sentence and after a layer change,
and Masks after a new sentence; wall clock and the process's CPU time. Each round runs the baseline and this
checkout in fresh processes one after the other (their order flips every round), so both see the same load. This is
the server's share of a redraw; the browser's is bench.speed's `sentence_s` / `layer_s` (docs/benchmarks.md, "The
Heads page's run halved").
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from bench.measure import ROOT, load

CHILD = "import json, sys; from bench import page_runs; print(json.dumps(page_runs.runs(int(sys.argv[1]))))"


def _timed(at) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    at.run()
    return 1000 * (time.perf_counter() - wall), 1000 * (time.process_time() - cpu)


def runs(n: int = 12) -> dict:
    """{row: [wall ms, CPU ms]} of this working directory's app: medians of n runs after two to warm up."""
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(Path.cwd() / "app.py"), default_timeout=300)
    at.run()
    times = {"heads_sentence": [], "heads_layer": [], "masks_sentence": []}
    for i in range(n + 2):
        next(t for t in at.text_area if t.label == "Sentence").set_value(f"Visitor {i} thinks about the garden.")
        sentence = _timed(at)
        at.sidebar.slider[0].set_value(1 - i % 2)  # the layer slider: 1, 0, 1, ...
        layer = _timed(at)
        if i >= 2:
            times["heads_sentence"].append(sentence)
            times["heads_layer"].append(layer)
    at.switch_page("app_pages/masks.py").run()
    for i in range(n + 2):
        next(t for t in at.text_area if t.label == "Sentence").set_value(f"Visitor {i} dreams of the sea.")
        masks = _timed(at)
        if i >= 2:
            times["masks_sentence"].append(masks)
    assert not at.exception, at.exception
    return {row: [round(statistics.median(t[k] for t in v), 1) for k in (0, 1)] for row, v in times.items()}


def side_by_side(baseline: str, rounds: int = 3, n: int = 12) -> dict:
    """{tree: [runs() of each round]} for the baseline and this checkout, alternated round by round."""
    trees = {"baseline": str(Path(baseline).resolve()), "branch": str(ROOT)}
    out = {name: [] for name in trees} | {"load": [load()]}
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    for r in range(rounds):
        for name in list(trees) if r % 2 == 0 else list(trees)[::-1]:
            env["PYTHONPATH"] = trees[name]
            command = [sys.executable, "-c", CHILD, str(n)]
            run = subprocess.run(command, cwd=trees[name], env=env, capture_output=True, text=True, check=True)
            out[name].append(json.loads(run.stdout.strip().splitlines()[-1]))
            print(name, r, out[name][-1], flush=True)
        out["load"].append(load())
    return out


if __name__ == "__main__":
    print(json.dumps(side_by_side(os.environ["BENCH_BASELINE"], int(sys.argv[1]) if len(sys.argv) > 1 else 3)))
