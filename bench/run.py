"""One command for every benchmark:

    .venv/bin/python -m bench            # full sizes; writes bench/out/results.json and docs/benchmarks.md
    .venv/bin/python -m bench --quick    # tiny sizes, seconds; writes bench/out/results-quick.json only

The first run creates bench/.venv-bench (the project's packages via a .pth file, plus bertviz, psutil and
matplotlib, which the project itself never depends on) and re-runs itself there. --no-bench-env stays in
the current interpreter (benches that need bertviz are then reported as not measured).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shlex
import subprocess
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "out"
DOC = ROOT / "docs" / "benchmarks.md"
FIGURE_STEM = ROOT / "docs" / "benchmarks-scaling"
GROUPS = ("trace", "mha", "fix", "scaling", "browser")

FULL = dict(
    trace=dict(n_tokens=128, repeat=40, warmup=5),
    mha=dict(batch=128, n_tokens=64, d_model=512, n_head=8, repeat=40, warmup=5),
    fix=dict(n_tokens=128, repeat=60, warmup=5, long_tokens=512, long_repeat=20),
    scaling=dict(sizes=(16, 64, 128, 256, 512), repeat=15, warmup=3, memory_sizes=None),
    browser=dict(
        cold_runs=3,
        rounds=10,
        warmup=2,
        n_tokens=20,
        bytes_sizes=(128, 512),
        sessions=8,
        session_tokens=128,
        whatif=(
            "postScriptGC off (app unchanged)",
            "gc.freeze() after the model load",
        ),
    ),
)
QUICK = dict(
    trace=dict(n_tokens=16, repeat=3, warmup=1),
    mha=dict(batch=4, n_tokens=16, d_model=64, n_head=4, repeat=3, warmup=1),
    fix=dict(n_tokens=16, repeat=3, warmup=1, long_tokens=None),
    scaling=dict(sizes=(8, 16, 32), repeat=3, warmup=1, memory_sizes=(32,)),
    browser=dict(
        cold_runs=1,
        rounds=2,
        warmup=1,
        n_tokens=20,
        bytes_sizes=(16, 32),
        sessions=2,
        session_tokens=16,
        whatif=("postScriptGC off (app unchanged)",),
    ),
)


def parse(argv):
    p = argparse.ArgumentParser(
        prog="python -m bench", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--quick", action="store_true", help="tiny sizes and few repeats: checks that every bench runs")
    p.add_argument("--only", default=",".join(GROUPS), help=f"comma-separated subset of {','.join(GROUPS)}")
    p.add_argument("--no-bench-env", action="store_true", help="do not create/use bench/.venv-bench")
    p.add_argument(
        "--json", type=Path, default=None, help="where to write the results (default bench/out/results[-quick].json)"
    )
    p.add_argument(
        "--doc", type=Path, default=None, help="Markdown to update (default docs/benchmarks.md; never for --quick)"
    )
    args = p.parse_args(argv)
    args.only = [g.strip() for g in args.only.split(",") if g.strip()]
    bad = [g for g in args.only if g not in GROUPS]
    if bad:
        p.error(f"unknown bench group(s) {bad}; choose from {GROUPS}")
    return args


def log(msg: str) -> None:
    print(msg, flush=True)


def _chromium_version() -> str:
    try:
        from .browser import chromium_path

        return subprocess.run([chromium_path(), "--version"], capture_output=True, text=True, timeout=30).stdout.strip()
    except Exception:  # noqa: BLE001
        return "unavailable"


def run(args) -> dict:
    import torch

    from . import core, machine

    cfg = QUICK if args.quick else FULL
    torch.set_num_threads(core.app_threads())
    res: dict = {
        "command": os.environ.get("ATTNVIZ_BENCH_COMMAND") or "python -m bench " + shlex.join(sys.argv[1:]),
        "quick": args.quick,
        "started": dt.datetime.now().isoformat(timespec="seconds"),
        "machine": machine.info(),
        "skipped": [],
        "errors": {},
    }

    def step(name, fn):
        log(f"[bench] {name} ...")
        t = time.perf_counter()
        try:
            res[name] = fn()
            res.setdefault("measured_at", {})[name] = {
                "at": dt.datetime.now().isoformat(timespec="seconds"),
                "loadavg": [round(x, 2) for x in machine.load()],
                "command": res["command"],
            }
            log(f"[bench] {name} done in {time.perf_counter() - t:.0f} s")
        except Exception as e:  # noqa: BLE001 - one broken bench must not hide the others
            res["errors"][name] = "".join(traceback.format_exception(e))[-4000:]
            log(f"[bench] {name} FAILED: {e}")

    if "trace" in args.only:
        step("trace_overhead", lambda: core.trace_overhead(**cfg["trace"]))
    if "mha" in args.only:
        step("mha_vs_torch", lambda: core.mha_vs_torch(**cfg["mha"]))
    if "fix" in args.only:
        from . import before_after

        sizes = {k: cfg["mha"][k] for k in ("batch", "n_tokens", "d_model", "n_head")}
        step("fix", lambda: before_after.fixes(sizes, **cfg["fix"]))
    if "scaling" in args.only:
        step("scaling", lambda: core.scaling(**cfg["scaling"]))
    if "browser" in args.only:
        _browser(res, cfg["browser"], step)
    res["loadavg_end"] = [round(x, 2) for x in machine.load()]
    res["finished"] = dt.datetime.now().isoformat(timespec="seconds")
    return res


def _browser(res: dict, cfg: dict, step) -> None:
    from playwright.sync_api import sync_playwright

    from . import bertviz_bytes, browser, core

    res["chromium"] = _chromium_version()
    lm, _ = core.models()
    tok = lm.tokenizer
    with sync_playwright() as p:
        br = browser.launch(p)
        try:
            step("cold_start", lambda: browser.cold_start(br, runs=cfg["cold_runs"]))
            step("sessions", lambda: browser.sessions_memory(br, tok, cfg["sessions"], cfg["session_tokens"]))
            server = browser.Server(OUT / "warm.log").start()
            try:
                step("interaction", lambda: _interaction(browser, br, server, tok, cfg))

                def bytes_bench():
                    rows = browser.page_bytes(br, server, tok, cfg["bytes_sizes"])
                    if bertviz_bytes.available():
                        for n, bv in bertviz_bytes.measure(lm, cfg["bytes_sizes"]).items():
                            rows[n]["bertviz"] = bv
                    else:
                        res["skipped"].append("bertviz HTML size (bertviz is only in the bench environment)")
                    return {"rows": rows, "target_tokens": max(cfg["bytes_sizes"])}

                step("bytes", bytes_bench)
            finally:
                server.stop()
        finally:
            br.close()


def _interaction(browser, br, server, tok, cfg) -> dict:
    """The app as it is, plus the what-if variants (patched copies) when asked, rounds alternating."""
    from . import whatif

    servers, notes = {"as is": server}, {}
    started = []
    try:
        for name in cfg["whatif"]:
            spec = whatif.WHATIF[name]
            root, missing = whatif.build(name)
            if missing:
                notes[name] = "not run: patch target gone (" + "; ".join(missing) + ")"
                continue
            s = browser.Server(OUT / f"whatif-{len(started)}.log", args=tuple(spec.get("args", ())), root=root).start()
            started.append(s)
            servers[name] = s
            notes[name] = spec["why"]
        res = browser.interaction_times(br, servers, tok, cfg["n_tokens"], cfg["rounds"], cfg["warmup"])
    finally:
        for s in started:
            s.stop()
    res["whatif_notes"] = notes
    return res


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse(argv)
    from . import env

    if not args.no_bench_env and not env.inside():
        os.environ.setdefault("ATTNVIZ_BENCH_COMMAND", f"{_rel(sys.executable)} -m bench {shlex.join(argv)}".strip())
        try:
            env.ensure(log)
            env.reexec_inside(argv)  # does not return
        except (subprocess.CalledProcessError, OSError) as e:
            log(f"[bench] could not prepare bench/.venv-bench ({e}); continuing without bertviz/matplotlib/psutil")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    OUT.mkdir(parents=True, exist_ok=True)
    res = run(args)
    out = args.json or OUT / ("results-quick.json" if args.quick else "results.json")
    if set(args.only) != set(GROUPS) and out.exists():
        # a partial run updates the sections it measured and keeps the others from the previous run
        old = json.loads(out.read_text())
        if old.get("quick") == res["quick"]:
            merged = {**old, **{k: v for k, v in res.items() if k not in ("errors", "skipped", "measured_at")}}
            merged["measured_at"] = {**old.get("measured_at", {}), **res.get("measured_at", {})}
            merged["errors"] = res["errors"]
            merged["skipped"] = res["skipped"]
            merged["command"] = old.get("command", res["command"])
            merged["partial_commands"] = old.get("partial_commands", []) + [res["command"]]
            res = merged
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(res, indent=1, default=str))
    from . import report

    figure = None
    if res.get("scaling") and not args.quick:
        from . import plot

        figure = plot.write(res["scaling"], FIGURE_STEM).name
    doc = args.doc or (None if args.quick else DOC)
    if doc is not None:
        report.write(doc, res, figure)
        log(f"[bench] wrote {_rel(doc)}")
    log(f"[bench] results in {_rel(out)}")
    print()
    print(
        "\n".join(
            ["| what | compared with | measured | ratio | target | status |", "|---|---|---|---|---|---|"]
            + report.summary_rows(res)
        )
    )
    for name, err in res["errors"].items():
        print(f"\n[bench] {name} failed:\n{err}", file=sys.stderr)
    return 1 if res["errors"] else 0


def _rel(p) -> str:
    """A path relative to the checkout when it is inside it (symlinks not followed: .venv/bin/python stays)."""
    try:
        return str(Path(os.path.abspath(p)).relative_to(ROOT))
    except ValueError:
        return str(p)
