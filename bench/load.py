"""Sessions per replica: N sessions in one Chromium against ONE server started as the container starts it.

    python -m bench.load --sessions 8 16 32 [--spread 0 20] [--write-docs]   # the table in docs/deploy.md

For each N, a fresh server (scripts/serve.sh, hosted mode) and N browser contexts (sessions), each on the Heads page
with its own sentence; then, --rounds times, every session submits a new sentence of its own, all at once (--spread 0)
or each at a random moment within S seconds, timed in the page (bench/browser.py). Afterwards every page must show its
own tokens and numbers (its sentence's trace to 1e-5). Server and Chromium share this machine's cores.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import random
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field

from bench.browser import chromium, marker, new_sentence, open_page
from bench.measure import OUT, ROOT, serve, stop
from bench.report import table

# What a page shows: the single head's token labels, the first heatmap of the grid, and any exception.
SHOWN = """() => {
  const fig = name => Array.from(document.querySelectorAll('.js-plotly-plot'))
    .find(gd => ((gd.layout || {}).meta || {}).figure === name);
  const z = fig('head_grid')._fullData.find(d => d.type === 'heatmap').z;
  return {ticks: Array.from(fig('head_detail').layout.yaxis.ticktext || [], String),
          z: Array.from(z, row => Array.from(row, v => (v === null || Number.isNaN(v)) ? null : v)),
          errors: document.querySelectorAll("[data-testid='stException']").length};
}"""
DOCS = ROOT / "docs" / "deploy.md"
BEGIN, END = "<!-- load:begin -->", "<!-- load:end -->"


@dataclass
class Level:
    sessions: int
    spread: float  # 0: every session submits at the same instant; else each at a random moment within `spread` s
    runs: list[float] = field(default_factory=list)  # key press -> the script run has ended (the server's part)
    drawn: list[float] = field(default_factory=list)  # key press -> heatmaps drawn (what a person waits for)
    rss_mb: list[float] = field(default_factory=list)  # the server idle, all sessions open, the peak
    cpu_per_run: float = 0.0  # server CPU seconds per new sentence (does not depend on how busy the host is)
    cores: float = 0.0  # server CPU seconds / wall seconds during the bursts
    load_avg: float = 0.0  # the machine's 1-minute load average before the level (other work on the host)
    checked: int = 0  # pages whose tokens and numbers matched their own trace
    failures: list[str] = field(default_factory=list)


def _usage(pid: int) -> tuple[float, float]:
    """A process's resident MB and CPU seconds (/proc/PID/stat after the name: utime, stime, rss in pages)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return int(fields[21]) * os.sysconf("SC_PAGE_SIZE") / 2**20, cpu


async def _peak_rss(pid: int, peak: list[float]) -> None:
    while True:
        peak[0] = max(peak[0], _usage(pid)[0])
        await asyncio.sleep(0.2)


async def level(browser, n: int, rounds: int, spread: float, model, nice: int, timeout_ms: float) -> Level:
    import numpy as np

    import attnviz

    v, rng = Level(n, spread, load_avg=os.getloadavg()[0]), random.Random(n)
    proc, base = serve(OUT / f"load-server-{n}.log", nice)
    try:
        v.rss_mb = [_usage(proc.pid)[0]]
        pages = await asyncio.gather(*(open_page(browser, base, *marker(i), timeout_ms) for i in range(n)))
        (opened, cpu0), t0 = _usage(proc.pid), time.perf_counter()
        peak, v.rss_mb = [opened], [*v.rss_mb, opened]
        sampler = asyncio.create_task(_peak_rss(proc.pid, peak))

        async def submit(page, i: int):
            await asyncio.sleep(rng.uniform(0, spread))
            return await new_sentence(page, *marker(i))

        for r in range(1, rounds + 1):
            for run, drawn in await asyncio.gather(*(submit(p, r * n + i) for i, p in enumerate(pages))):
                v.runs.append(run)
                v.drawn.append(drawn)
        sampler.cancel()
        v.cpu_per_run = (_usage(proc.pid)[1] - cpu0) / len(v.runs)
        v.cores, v.rss_mb = v.cpu_per_run * len(v.runs) / (time.perf_counter() - t0), [*v.rss_mb, peak[0]]
        for i, page in enumerate(pages):  # each page shows its own last sentence: tokens, and layer 0, head 0
            shown, tr = await page.evaluate(SHOWN), attnviz.trace(model, marker(rounds * n + i)[0])
            z, w = np.array(shown["z"], dtype=float), tr.weights[0, 0]
            own = [t.split(" ", 1)[1] for t in shown["ticks"]] == list(tr.tokens) and not shown["errors"]
            if own and z.shape == w.shape and np.allclose(z, w, atol=1e-5):
                v.checked += 1
            else:
                v.failures.append(f"session {i} shows {shown}, not its own sentence's trace ({tr.tokens})")
        await asyncio.gather(*(page.context.close() for page in pages))
    finally:
        stop(proc)
    return v


async def run(sessions, rounds: int, spreads, nice: int, timeout_s: float) -> list[Level]:
    from playwright.async_api import async_playwright

    import attnviz

    model, levels = attnviz.load_model(), []
    async with async_playwright() as p:
        browser = await chromium(p)
        for spread in spreads:
            for n in sessions:
                levels.append(await level(browser, n, rounds, spread, model, nice, timeout_s * 1000))
                print(table([row(levels[-1])]), flush=True)
        await browser.close()
    return levels


def _p95(values: list[float]) -> float:
    return sorted(values)[math.ceil(0.95 * len(values)) - 1]  # nearest rank


HEAD = ["sessions", "new sentences sent", "→ heatmaps drawn, p50", "p95", "max", "→ run ended, p50", "p95",
        "server CPU per sentence", "server cores busy", "server RSS: idle → open → peak", "own view checked"]  # fmt: skip


def row(v: Level) -> list:
    s = lambda x: f"{x:.2f} s"  # noqa: E731
    ok = f"{v.checked}/{v.sessions}" + (" **FAILED**" if v.failures else "")
    return [v.sessions, "all at once" if v.spread == 0 else f"each within {v.spread:g} s",
            *map(s, (statistics.median(v.drawn), _p95(v.drawn), max(v.drawn), statistics.median(v.runs), _p95(v.runs))),
            s(v.cpu_per_run), f"{v.cores:.2f}", " → ".join(f"{x:.0f}" for x in v.rss_mb) + " MB", ok]  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.load", description=__doc__.split("\n\n")[0])
    ap.add_argument("--sessions", type=int, nargs="+", default=[8, 16, 32])
    ap.add_argument("--rounds", type=int, default=3, help="new sentences per session and level")
    ap.add_argument("--spread", type=float, nargs="+", default=[0.0], help="0: all at once; S: each within S s")
    ap.add_argument("--nice", type=int, default=0, help="server niceness (negative: ahead of other work; root)")
    ap.add_argument("--write-docs", action="store_true", help=f"replace the measured table in {DOCS.name}")
    args = ap.parse_args(argv)
    levels = asyncio.run(run(args.sessions, args.rounds, args.spread, args.nice, timeout_s=300))
    rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout
    command = " ".join(["python -m bench.load", *(argv if argv is not None else sys.argv[1:])])
    note = (
        f"Measured {time.strftime('%Y-%m-%d')} at commit {rev.strip() or '?'} by `{command}` (Chromium through "
        f"Playwright): {os.cpu_count()} cores shared by the server, Chromium and other work on the host; its 1-minute "
        f"load average before each level: {', '.join(f'{v.load_avg:.1f}' for v in levels)}."
    )
    text = table([row(v) for v in levels], HEAD) + f"\n\n{note}"
    print(f"\n{text}")
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "load.json").write_text(json.dumps([asdict(v) for v in levels], indent=1))
    for failure in (f"FAILED ({v.sessions} sessions): {f}" for v in levels for f in v.failures):
        print(failure)
    if args.write_docs:
        doc = DOCS.read_text()
        DOCS.write_text(doc[: doc.index(BEGIN) + len(BEGIN)] + f"\n{text}\n" + doc[doc.index(END) :])
    return 1 if any(v.failures for v in levels) else 0


if __name__ == "__main__":
    raise SystemExit(main())
