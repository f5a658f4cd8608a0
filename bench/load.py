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

import numpy as np

import attnviz
from bench.browser import chromium, marker, new_sentence, open_page
from bench.measure import OUT, ROOT, served
from bench.report import table, write

# What a page shows: the single head's token labels, the first heatmap of the grid, and any exception.
SHOWN = """() => {
  const fig = name => Array.from(document.querySelectorAll('.js-plotly-plot'))
    .find(gd => ((gd.layout || {}).meta || {}).figure === name);
  const z = fig('head_grid')._fullData.find(d => d.type === 'heatmap').z;
  return {ticks: Array.from(fig('head_detail').layout.yaxis.ticktext || [], String),
          z: Array.from(z, row => Array.from(row, v => (v === null || Number.isNaN(v)) ? null : v)),
          errors: document.querySelectorAll("[data-testid='stException']").length};
}"""


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
    failures: list[str] = field(default_factory=list)  # pages that did not show their own tokens and numbers


def _usage(pid: int) -> tuple[float, float, float]:
    """A process's resident MB now and at its peak (the kernel's high-water mark: no sampling), and its CPU seconds."""
    with open(f"/proc/{pid}/status") as f:
        kb = {k: int(v.split()[0]) for k, v in (line.split(":", 1) for line in f) if k in ("VmRSS", "VmHWM")}
    with open(f"/proc/{pid}/stat") as f:
        utime, stime = f.read().rsplit(")", 1)[1].split()[11:13]
    return kb["VmRSS"] / 1024, kb["VmHWM"] / 1024, (int(utime) + int(stime)) / os.sysconf("SC_CLK_TCK")


async def level(browser, n: int, rounds: int, spread: float, model, nice: int) -> Level:
    v, rng = Level(n, spread, load_avg=os.getloadavg()[0]), random.Random(n)

    with served(OUT / f"load-server-{n}.log", nice) as (proc, base):
        idle = _usage(proc.pid)[0]
        pages = await asyncio.gather(*(open_page(browser, base, *marker(i)) for i in range(n)))
        (opened, _, cpu0), t0 = _usage(proc.pid), time.perf_counter()
        for r in range(1, rounds + 1):
            sent = (new_sentence(p, *marker(r * n + i), after=rng.uniform(0, spread)) for i, p in enumerate(pages))
            got = await asyncio.gather(*sent)
            v.runs, v.drawn = v.runs + [run for run, _ in got], v.drawn + [drawn for _, drawn in got]
        _, peak, cpu = _usage(proc.pid)
        v.cpu_per_run, v.rss_mb = (cpu - cpu0) / len(v.runs), [idle, opened, peak]
        v.cores = v.cpu_per_run * len(v.runs) / (time.perf_counter() - t0)
        for i, page in enumerate(pages):  # each page shows its own last sentence: tokens, and layer 0, head 0
            shown, tr = await page.evaluate(SHOWN), attnviz.trace(model, marker(rounds * n + i)[0])
            z, w = np.array(shown["z"], dtype=float), tr.weights[0, 0]
            own = [t.split(" ", 1)[1] for t in shown["ticks"]] == list(tr.tokens) and not shown["errors"]
            if not (own and z.shape == w.shape and np.allclose(z, w, atol=1e-5)):
                v.failures.append(f"session {i} shows {shown}, not its own sentence's trace ({tr.tokens})")
        await asyncio.gather(*(page.context.close() for page in pages))
    return v


async def run(sessions, rounds: int, spreads, nice: int) -> list[Level]:
    model, levels = attnviz.load_model(), []
    async with chromium() as browser:
        for spread in spreads:
            for n in sessions:
                levels.append(await level(browser, n, rounds, spread, model, nice))
                print(table([row(levels[-1])]), flush=True)
    return levels


HEAD = ["sessions", "new sentences sent", "→ heatmaps drawn, p50", "p95", "max", "→ run ended, p50", "p95",
        "server CPU per sentence", "server cores busy", "server RSS: idle → open → peak", "own view checked"]  # fmt: skip


def row(v: Level) -> list:
    s, p95 = lambda x: f"{x:.2f} s", lambda xs: sorted(xs)[math.ceil(0.95 * len(xs)) - 1]  # noqa: E731 - nearest rank
    ok = f"{v.sessions - len(v.failures)}/{v.sessions}" + (" **FAILED**" if v.failures else "")
    return [v.sessions, "all at once" if v.spread == 0 else f"each within {v.spread:g} s",
            *map(s, (statistics.median(v.drawn), p95(v.drawn), max(v.drawn), statistics.median(v.runs), p95(v.runs))),
            s(v.cpu_per_run), f"{v.cores:.2f}", " → ".join(f"{x:.0f}" for x in v.rss_mb) + " MB", ok]  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.load", description=__doc__.split("\n\n")[0])
    ap.add_argument("--sessions", type=int, nargs="+", default=[8, 16, 32])
    ap.add_argument("--rounds", type=int, default=3, help="new sentences per session and level")
    ap.add_argument("--spread", type=float, nargs="+", default=[0.0], help="0: all at once; S: each within S s")
    ap.add_argument("--nice", type=int, default=0, help="server niceness (negative: ahead of other work; root)")
    ap.add_argument("--write-docs", action="store_true", help="replace the measured table in docs/deploy.md")
    args = ap.parse_args(argv)
    levels = asyncio.run(run(args.sessions, args.rounds, args.spread, args.nice))
    rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout
    command = " ".join(["python -m bench.load", *(argv if argv is not None else sys.argv[1:])])
    text = table([row(v) for v in levels], HEAD) + (
        f"\n\nMeasured {time.strftime('%Y-%m-%d')} at commit {rev.strip() or '?'} by `{command}` (Chromium through "
        f"Playwright): {os.cpu_count()} cores shared by the server, Chromium and other work on the host; its 1-minute "
        f"load average before each level: {', '.join(f'{v.load_avg:.1f}' for v in levels)}."
    )
    print(f"\n{text}")
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "load.json").write_text(json.dumps([asdict(v) for v in levels], indent=1))
    print(*(f"FAILED ({v.sessions} sessions): {f}" for v in levels for f in v.failures), sep="\n")
    if args.write_docs:
        write(ROOT / "docs" / "deploy.md", text, "<!-- load:begin -->", "<!-- load:end -->")
    return 1 if any(v.failures for v in levels) else 0


if __name__ == "__main__":
    raise SystemExit(main())
