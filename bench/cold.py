"""The cold start alone (issue 28: the first heatmap within 5 s of the server starting), step by step, this checkout
interleaved with another (BENCH_BASELINE, e.g. /work/main): `python -m bench.cold [rounds]`.

Each round starts each tree's scripts/serve.sh in turn (never two at once; the order alternates every round), opens
the Heads page in a fresh browser context as soon as the health check answers, and records, in seconds from the
server's start: the health check answered (`health_s`), the page's HTML loaded (`html_s`), the session's first script
run started and ended (`run_s`, `ran_s`: the script-state attribute Streamlit sets), the first Plotly chart on the page
(`chart_s`, an element still empty) and the first heatmap drawn (`cold_s`, as bench/speed.py's cold_s: two charts with
their SVG). From the server's log: the warm-up thread's own line (`warm_s` and its steps). Medians per tree, with the
load average. Chromium's own start is paid before the clock starts.

`first_s` is the first heatmap on screen whatever the run is doing: the Heads title and two charts drawn (the hidden
chart of the loading notice is one); on a checkout with the default view's trace made ahead (attnviz.ui.made_ahead)
that is the preview drawn from the file while the model loads, and `cold_s` is then the live page (the run over).
BENCH_FIRST_VIEW says which start is measured: `made` (default: the file is there, as in a built image or on any
start after the first) or `none` (the cache folder emptied before each start: the first start ever). Each tree gets
its own cache folder under bench/out (ATTNVIZ_CACHE_DIR), so a developer's own cache is never touched.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from bench.browser import chromium
from bench.measure import OUT, ROOT, load, served
from bench.speed import CHARTS, DRAWN

# Installed before the page's own scripts: when each step of the first run happened (performance.now(), ms since
# the navigation started).
TIMELINE = """(() => {
  const t = window.__cold = {};
  const mark = (name) => { if (t[name] === undefined) t[name] = performance.now(); };
  new MutationObserver(() => {
    const app = document.querySelector("[data-testid='stApp']");
    if (!app) return;
    mark('app');
    const state = app.getAttribute('data-test-script-state');
    if (state === 'running') mark('run');
    if (state === 'notRunning' && t.run !== undefined) mark('ran');
    if (document.querySelector('.js-plotly-plot')) mark('chart');
    if (document.querySelector('.js-plotly-plot .main-svg')) mark('svg');
  }).observe(document, {subtree: true, childList: true, attributes: true});
})()"""
# ... when the tab handled the first message over 20 kB (`msg_s`: the first figures, the made-ahead ones on a branch
# with them), to tell the server's sending from the tab's drawing, and the end of the tab's longest stall before the
# heatmap (`stall_end_s`; `stall` in ms: one task that long, e.g. Plotly's script run)
TIMELINE = TIMELINE.replace(
    """(() => {
  const t = window.__cold = {};""",
    """(() => {
  const t = window.__cold = {};
  const WS = window.WebSocket;
  window.WebSocket = function(...a) { const w = new WS(...a);
    w.addEventListener('message', e => { const n = e.data.byteLength || e.data.size || 0;
      if (n > 20000 && t.msg === undefined) t.msg = performance.now(); });
    return w; };
  window.WebSocket.prototype = WS.prototype;
  let last = performance.now();  // the tab's main thread: its longest stall (one task that long) and when it ended
  setInterval(() => { const now = performance.now();
    if (now - last > (t.stall || 0) + 50) { t.stall = now - last - 50; t.stall_end = now; } last = now; }, 50);""",
)
STEPS = ("html", "app", "run", "ran", "chart", "svg")
# The marks, with when the tab asked for Plotly's script (our bundle, attnviz.ui.plotly_view.SCRIPT; Streamlit's own
# 4.7 MB chunk on a checkout before it) and when it had it all
PLOTLY_FETCH = """() => {
  const t = Object.assign({}, window.__cold);
  const js = performance.getEntriesByType('resource').find(e => /PlotlyChart|plotly-attnviz/.test(e.name));
  if (js) { t.plotly_asked = js.startTime; t.plotly_got = js.responseEnd; }
  return t;
}"""
# The first heatmap on screen, the run over or not (bench.speed's DRAWN also waits for the run's end)
FIRST = """() => document.querySelector("[data-testid='stMain'] h1") && CHARTS >= 2""".replace("CHARTS", CHARTS)


_MADE: set[Path] = set()


def cache_folder(root: Path, made: bool) -> Path:
    """The tree's own ATTNVIZ_CACHE_DIR for one start: with the made-ahead file (written by the tree's own
    scripts/first_view.py where it has one, once per run: a file made by other code is stale) or emptied."""
    where = OUT / f"cold-cache-{root.name}"
    if not made:
        shutil.rmtree(where, ignore_errors=True)
    elif (root / "scripts" / "first_view.py").exists() and root not in _MADE:  # made afresh once per run
        env = dict(os.environ, ATTNVIZ_CACHE_DIR=str(where), HF_HUB_OFFLINE="1")
        subprocess.run([sys.executable, "scripts/first_view.py"], cwd=root, env=env, check=True, capture_output=True)
        _MADE.add(root)
    return where


async def one(browser, root: Path, log: Path) -> dict:
    """One cold start of `root`'s server: seconds from its start to each step."""
    made = os.environ.get("BENCH_FIRST_VIEW", "made") != "none"
    env = {"ATTNVIZ_HOSTED": "0", "ATTNVIZ_MAX_TOKENS": "2048"}  # as bench/speed.py serves
    env["ATTNVIZ_CACHE_DIR"] = str(cache_folder(root, made))
    with served(log, root=root, env=env) as (proc, base):
        healthy = time.perf_counter() - proc.started
        context = await browser.new_context(viewport={"width": 1280, "height": 800})
        await context.add_init_script(TIMELINE)
        page = await context.new_page()
        page.set_default_timeout(300_000)
        opened = time.perf_counter() - proc.started
        await page.goto(base + "/", wait_until="domcontentloaded")
        html = time.perf_counter() - proc.started
        await page.wait_for_function(FIRST, polling=50)
        first = time.perf_counter() - proc.started
        await page.wait_for_function(DRAWN, arg=2, polling=50)
        cold = time.perf_counter() - proc.started
        marks = await page.evaluate(PLOTLY_FETCH)
        await context.close()
        await asyncio.sleep(1)  # the warm-up's line reaches the log
    row = {"health_s": healthy, "html_s": html, "first_s": first, "cold_s": cold}
    row |= {f"{k}_s": opened + v / 1000 for k, v in marks.items() if k != "stall"} | {"stall": marks.get("stall")}
    text = log.read_text(errors="replace")
    for key, pattern in (("warm_s", r"warm in ([\d.]+) s"), ("model_s", r"loaded model 'bundled' in ([\d.]+) s")):
        found = re.search(pattern, text)
        row[key] = float(found.group(1)) if found else float("nan")
    found = [re.search(pattern, text) for pattern in (r"warm in [\d.]+ s \((.*)\)", r"attnviz: warm-up (setup .*)")]
    row["warm_steps"] = "; ".join(f.group(1) for f in found if f)
    return row


async def run(rounds: int = 3, baseline: str | None = None) -> dict:
    baseline = baseline or os.environ.get("BENCH_BASELINE")
    trees = {"branch": ROOT} | ({"baseline": Path(baseline).resolve()} if baseline else {})
    rows = {name: [] for name in trees}
    loads = [load()]
    async with chromium() as browser:
        for r in range(rounds):
            for name in list(trees) if r % 2 == 0 else list(trees)[::-1]:
                row = await one(browser, trees[name], OUT / f"cold-{name}.log")
                rows[name].append(row)
                print(f"[cold] round {r} {name}", _fmt(row), "load", load(), file=sys.stderr, flush=True)
            loads.append(load())
    first_view = os.environ.get("BENCH_FIRST_VIEW", "made")
    return {"rows": rows, "loads": loads, "trees": {k: str(v) for k, v in trees.items()}, "first_view": first_view}


def _fmt(row: dict) -> str:
    return " ".join(f"{k}={v:.2f}" if isinstance(v, float) else f"{k}={v!r}" for k, v in row.items())


def render(res: dict) -> str:
    keys = "health_s html_s app_s run_s plotly_asked_s plotly_got_s chart_s msg_s stall_end_s svg_s first_s model_s warm_s ran_s cold_s"
    keys = keys.split()
    names = list(res["rows"])
    head = ["step (s from the server's start)", *(f"{n} (median of {len(res['rows'][n])})" for n in names)]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for key in keys:
        meds = [statistics.median(r.get(key, float("nan")) for r in res["rows"][n]) for n in names]
        lines.append(f"| {key} | " + " | ".join(f"{m:.2f}" for m in meds) + " |")
    tail = f"load averages per round: {res['loads']}; trees: {res['trees']}; BENCH_FIRST_VIEW={res['first_view']}"
    return "\n".join(lines) + "\n\n" + tail


if __name__ == "__main__":
    result = asyncio.run(run(int(sys.argv[1]) if len(sys.argv) > 1 else 3))
    print(render(result))
