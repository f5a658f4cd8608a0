"""The warm-up's imports alone (issue 28: the first heatmap within 5 s of the server starting): what a fresh server
process imports and runs before the bundled model can answer, in CPU seconds per step and, from `python -X
importtime`, per package. `python -m bench.imports [rounds]` runs this checkout, interleaved with another
(BENCH_BASELINE, e.g. /work/main) and another interpreter (BENCH_PYTHON, e.g. a venv without an optional package).

Each round starts a fresh interpreter per configuration, with the cyclic GC off as scripts/serve.py has it, imports
Streamlit's command line (the server's own start, not counted), then `attnviz.ui` (what a visitor's first run
imports), transformers' modeling code, and loads the bundled model (the rest of the imports and the load itself).
CPU time of the process, so another process on a shared core inflates it less than the wall clock. `unused` is the
import time of modules a BERT forward pass never runs, which transformers imports whenever they are installed (the
prefixes in UNUSED, with everything they import).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from collections import Counter
from pathlib import Path

from bench.measure import ROOT, load

CHILD = """
import gc; gc.disable()  # as scripts/serve.py
import json, sys, time
marks = [time.process_time()]
import streamlit.web.cli
marks.append(time.process_time())
import attnviz.ui
marks.append(time.process_time())
import transformers.modeling_utils
marks.append(time.process_time())
import attnviz
attnviz.load_model(None)
marks.append(time.process_time())
print("@@", json.dumps([b - a for a, b in zip(marks, marks[1:])]))
"""
STEPS = ("server", "attnviz.ui", "modeling code", "model")
SERVER_LAST = "streamlit.web.cli"  # importtime lists a module when it is done: rows after it are the warm-up's
UNUSED = ("torch.distributed.tensor", "torch._dynamo", "scipy")  # transformers imports them; a forward never runs them


def rows(importtime: str) -> list[tuple[int, int, str]]:
    """(self microseconds, depth, module) per `-X importtime` line, in the order Python printed them."""
    out = []
    for line in importtime.splitlines():
        if line.startswith("import time:") and "self [us]" not in line:
            own, _, name = line[len("import time:") :].split("|")
            out.append((int(own), (len(name) - len(name.lstrip()) - 1) // 2, name.strip()))
    return out


def grouped(importtime: str) -> Counter:
    """Seconds of own import time after the server's start per group: a module imported (directly or not) by one
    of UNUSED counts as that prefix, any other as its top-level package. A module is printed after everything it
    imported, so its importers are found by reading the lines backwards."""
    table = rows(importtime)
    last = max((i for i, r in enumerate(table) if r[2] == SERVER_LAST), default=-1)
    out, stack = Counter(), []  # stack: (depth, group) of the importers open at this point, read backwards
    for own, depth, name in reversed(table[last + 1 :]):
        while stack and stack[-1][0] >= depth:
            stack.pop()
        inherited = next((g for _, g in reversed(stack) if g in UNUSED), None)
        mine = next((p for p in UNUSED if name == p or name.startswith(p + ".")), None)
        group = inherited or mine or name.split(".")[0]
        stack.append((depth, group))
        out[group] += own / 1e6
    return out


def once(root: Path, python: str) -> dict:
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    done = subprocess.run([python, "-X", "importtime", "-c", CHILD], cwd=root, env=env, capture_output=True,
                          text=True, timeout=600, check=True)  # fmt: skip
    steps = json.loads(next(line for line in done.stdout.splitlines() if line.startswith("@@"))[2:])
    groups = grouped(done.stderr)
    return dict(zip(STEPS, steps)) | {"groups": groups, "unused": sum(groups[p] for p in UNUSED)}


def run(rounds: int = 5) -> dict:
    configs = {"branch": (ROOT, sys.executable)}
    if baseline := os.environ.get("BENCH_BASELINE"):
        configs["baseline"] = (Path(baseline).resolve(), sys.executable)
    if python := os.environ.get("BENCH_PYTHON"):
        configs[f"branch, {python}"] = (ROOT, python)
    subprocess.run([sys.executable, "-m", "compileall", "-q", "attnviz"], cwd=ROOT, check=False)  # as serve.sh
    results, loads = {name: [] for name in configs}, [load()]
    for r in range(-1, rounds):  # round -1 warms the file cache and is not kept
        for name in list(configs) if r % 2 == 0 else list(configs)[::-1]:
            row = once(*configs[name])
            results[name] += [row] if r >= 0 else []
            print(f"[imports] round {r} {name}: " + " ".join(f"{k} {row[k]:.2f}" for k in (*STEPS, "unused")),
                  "load", load(), file=sys.stderr, flush=True)  # fmt: skip
        loads.append(load())
    return {"rows": results, "loads": loads}


def render(res: dict, top: int = 12) -> str:
    names = list(res["rows"])

    def row(label: str, get, bold: bool = False) -> str:
        cells = [f"{statistics.median(get(r) for r in res['rows'][n]):.2f}" for n in names]
        return f"| {label} | " + " | ".join(f"**{c}**" if bold else c for c in cells) + " |"

    lines = ["| CPU seconds (median of rounds) | " + " | ".join(names) + " |", "|" + " --- |" * (len(names) + 1)]
    lines += [row(key, lambda r, key=key: r[key]) for key in STEPS[1:]]
    lines.append(row("**after the server's own start**", lambda r: sum(r[k] for k in STEPS[1:]), bold=True))
    lines.append(row("import time: all (`-X importtime`, own times)", lambda r: sum(r["groups"].values())))
    lines.append(row("of it unused by a forward", lambda r: r["unused"]))
    groups = Counter()
    for r in res["rows"][names[0]]:
        groups.update(r["groups"])
    lines += [row(f"- {g}", lambda r, g=g: r["groups"][g]) for g, _ in groups.most_common(top)]
    return "\n".join(lines) + f"\n\nload averages per round: {res['loads']}"


if __name__ == "__main__":
    print(render(run(int(sys.argv[1]) if len(sys.argv) > 1 else 5)))
