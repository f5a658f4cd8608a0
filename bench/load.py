"""Sessions per replica: N concurrent browser sessions against ONE server started by the container's script.

    python -m bench.load --sessions 8 16 32            # prints a markdown table, writes bench/out/load.json
    python -m bench.load --sessions 8 16 32 --write-docs   # also replaces the table in docs/deploy.md

For each N: a fresh server (scripts/serve.sh, hosted mode, exactly as the container starts it), one Chromium
with N browser contexts (N separate sessions, no shared cookies), each on the Heads page. Then, `--rounds`
times, every session types its OWN new sentence at the same moment and presses Ctrl+Enter (a burst: the worst
case for one process). The latency is the time from that key press until the page shows the heatmaps of the
new sentence (script finished, head grid and single head drawn with the new tokens).

Afterwards every page is checked: its charts name exactly its own tokens and its first heatmap equals that
session's own trace (attnviz.trace in this process, to 1e-5), so no session saw another's attention.

The server's RSS (VmRSS of the process and any children) is sampled every 0.2 s; its CPU time during the
bursts gives the cores it used. Browsers and server share this machine's cores: the latencies include the
browsers' own drawing, which on a real deployment happens on the users' machines.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from dataclasses import asdict, dataclass, field
from pathlib import Path
from urllib.parse import quote

ROOT = Path(__file__).resolve().parents[1]
SERVE = ROOT / "scripts" / "serve.sh"
DOCS = ROOT / "docs" / "deploy.md"
OUT = ROOT / "bench" / "out"
BEGIN, END = "<!-- load:begin -->", "<!-- load:end -->"
IDLE = "[data-testid='stApp'][data-test-script-state='notRunning']"
CHROMIUM_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
    "--disable-sync", "--no-first-run", "--disable-quic",
]  # fmt: skip

# True once the page has finished its run and drawn the grid and the single head with `word` among the tokens.
DRAWN = """([word]) => {
    if (!document.querySelector("[data-testid='stApp'][data-test-script-state='notRunning']")) return false;
    const want = new Set(['head_grid', 'head_detail']);
    const drawn = Array.from(document.querySelectorAll('.js-plotly-plot')).filter(gd =>
        gd._fullLayout && gd.querySelector('.main-svg') && want.has(((gd.layout || {}).meta || {}).figure) &&
        ((gd.layout.yaxis || {}).ticktext || []).some(t => String(t).endsWith(' ' + word)));
    return drawn.length >= 2;
}"""

# What the page shows: the single head's token labels and the first heatmap of the head grid.
SHOWN = """() => {
    const plots = Array.from(document.querySelectorAll('.js-plotly-plot'));
    const fig = name => plots.find(gd => ((gd.layout || {}).meta || {}).figure === name);
    const grid = fig('head_grid'), detail = fig('head_detail');
    const z = grid._fullData.find(d => d.type === 'heatmap').z;
    return {
        ticks: Array.from(detail.layout.yaxis.ticktext || [], String),
        z: Array.from(z, row => Array.from(row, v => (v === null || Number.isNaN(v)) ? null : v)),
        errors: document.querySelectorAll("[data-testid='stException']").length,
    };
}"""


@dataclass
class Level:
    sessions: int
    rounds: int
    latencies: list[float] = field(default_factory=list)
    p50: float = 0.0
    p95: float = 0.0
    max: float = 0.0
    rss_idle_mb: float = 0.0  # server started, no session yet
    rss_open_mb: float = 0.0  # all N sessions open on their first sentence
    rss_peak_mb: float = 0.0  # highest sample during the bursts
    rss_after_mb: float = 0.0  # after the last burst, sessions still open
    cpu_cores: float = 0.0  # server CPU seconds / wall seconds during the bursts
    load_avg: float = 0.0  # the machine's 1-minute load average before the level (other work on the host)
    checked: int = 0  # pages whose tokens and numbers matched their own trace
    failures: list[str] = field(default_factory=list)


# --- the server ------------------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(port: int, log: Path, env: dict[str, str]) -> subprocess.Popen:
    """scripts/serve.sh with this interpreter's venv first on PATH (the script runs `python`, as the image does)."""
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    full = dict(os.environ, PATH=path, PORT=str(port), ATTNVIZ_ADDRESS="127.0.0.1", HF_HUB_OFFLINE="1", **env)
    proc = subprocess.Popen([str(SERVE)], cwd=ROOT, env=full, stdout=log.open("w"), stderr=subprocess.STDOUT)
    deadline = time.time() + 120
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited early; see {log}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2) as r:
                if r.read().strip() == b"ok":
                    return proc
        except OSError:
            time.sleep(0.3)
    proc.kill()
    raise RuntimeError(f"server not healthy after 120 s; see {log}")


def tree(pid: int) -> list[int]:
    """pid and all its descendants (serve.sh execs python, so normally just pid)."""
    children: dict[int, list[int]] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                ppid = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(d.name))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(children.get(p, []))
    return out


def rss_mb(pid: int) -> float:
    total = 0
    for p in tree(pid):
        try:
            with open(f"/proc/{p}/status") as f:
                total += int(next(line for line in f if line.startswith("VmRSS:")).split()[1])
        except (OSError, StopIteration):
            pass
    return total / 1024


def cpu_seconds(pid: int) -> float:
    total = 0
    for p in tree(pid):
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])  # utime, stime
        except (OSError, IndexError, ValueError):
            pass
    return total / os.sysconf("SC_CLK_TCK")


class Sampler:
    """The server's RSS every 0.2 s in a thread; `peak` since the last reset."""

    def __init__(self, pid: int):
        self.pid, self.peak, self._stop = pid, 0.0, threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        while not self._stop.wait(0.2):
            self.peak = max(self.peak, rss_mb(self.pid))

    def stop(self):
        self._stop.set()
        self._thread.join()


# --- sentences -------------------------------------------------------------------------------------------


def marker_words(tokenizer, count: int) -> list[str]:
    """`count` distinct plain words that the tokenizer keeps whole: each sentence's own marker."""
    vocab = sorted(w for w in tokenizer.get_vocab() if w.isalpha() and w.isascii() and 6 <= len(w) <= 9)
    step = max(1, len(vocab) // (count + 1))
    words = [w for w in vocab[::step] if tokenizer.tokenize(w) == [w]]
    if len(words) < count:
        raise RuntimeError(f"only {len(words)} marker words for {count} sentences")
    return words[:count]


def sentence(session: int, word: str) -> str:
    return f"Visitor {session} keeps thinking about the {word} all day."


# --- one level: N sessions -------------------------------------------------------------------------------


async def open_session(browser, base: str, text: str, timeout: float):
    ctx = await browser.new_context(viewport={"width": 1280, "height": 900})
    page = await ctx.new_page()
    page.set_default_timeout(timeout)
    await page.goto(f"{base}/?text={quote(text)}", wait_until="domcontentloaded")
    return ctx, page


async def wait_drawn(page, word: str, timeout: float) -> None:
    await page.wait_for_function(DRAWN, arg=[word], timeout=timeout, polling=50)


async def submit(page, text: str, word: str, timeout: float) -> float:
    """Type `text` into the sidebar, press Ctrl+Enter, and time until its heatmaps are drawn."""
    box = page.locator("textarea[aria-label='Sentence']")
    await box.fill(text)
    t0 = time.perf_counter()
    await box.press("Control+Enter")
    await wait_drawn(page, word, timeout)
    return time.perf_counter() - t0


async def run_level(n: int, rounds: int, browser, model, words: list[str], env: dict, timeout: float) -> Level:
    import numpy as np

    import attnviz

    level = Level(sessions=n, rounds=rounds, load_avg=os.getloadavg()[0])
    port = free_port()
    OUT.mkdir(parents=True, exist_ok=True)
    proc = start(port, OUT / f"load-server-{n}.log", env)
    base = f"http://127.0.0.1:{port}"
    contexts = []
    try:
        level.rss_idle_mb = rss_mb(proc.pid)
        # every session opens on its own first sentence; they load concurrently
        first = [sentence(i, words[i * (rounds + 1)]) for i in range(n)]
        opened = await asyncio.gather(*(open_session(browser, base, t, timeout) for t in first))
        contexts = [c for c, _ in opened]
        pages = [p for _, p in opened]
        await asyncio.gather(*(wait_drawn(p, words[i * (rounds + 1)], timeout) for i, p in enumerate(pages)))
        level.rss_open_mb = rss_mb(proc.pid)

        sampler = Sampler(proc.pid)
        cpu0, wall0 = cpu_seconds(proc.pid), time.perf_counter()
        final: list[tuple[str, str]] = []
        for r in range(1, rounds + 1):
            jobs = [(sentence(i, words[i * (rounds + 1) + r]), words[i * (rounds + 1) + r]) for i in range(n)]
            times = await asyncio.gather(*(submit(p, t, w, timeout) for p, (t, w) in zip(pages, jobs)))
            level.latencies.extend(times)
            final = jobs
        level.cpu_cores = (cpu_seconds(proc.pid) - cpu0) / (time.perf_counter() - wall0)
        sampler.stop()
        level.rss_peak_mb = max(sampler.peak, rss_mb(proc.pid))
        level.rss_after_mb = rss_mb(proc.pid)

        # each page shows its own sentence: its tokens, and its own numbers (layer 0, head 0)
        all_words = {w for _, w in final}
        for i, (page, (text, word)) in enumerate(zip(pages, final)):
            shown = await page.evaluate(SHOWN)
            tr = attnviz.trace(model, text)
            labels = [t.split(" ", 1)[1] for t in shown["ticks"]]
            z = np.array(shown["z"], dtype=float)
            others = (all_words - {word}) & set(labels)
            if labels != list(tr.tokens):
                level.failures.append(f"session {i}: shows tokens {labels}, its sentence has {list(tr.tokens)}")
            elif others:
                level.failures.append(f"session {i}: shows other sessions' words {sorted(others)}")
            elif z.shape != tr.weights[0, 0].shape or not np.allclose(z, tr.weights[0, 0], atol=1e-5):
                level.failures.append(f"session {i}: heatmap differs from its own trace")
            elif shown["errors"]:
                level.failures.append(f"session {i}: {shown['errors']} exception(s) on the page")
            else:
                level.checked += 1
    finally:
        for c in contexts:
            await c.close()
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
    lat = sorted(level.latencies)
    level.p50 = statistics.median(lat)
    level.p95 = lat[min(len(lat) - 1, max(0, round(0.95 * len(lat)) - 1))]
    level.max = lat[-1]
    return level


async def run(sessions: list[int], rounds: int, env: dict, timeout: float) -> list[Level]:
    from playwright.async_api import async_playwright

    import attnviz

    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        raise SystemExit("Debian's chromium is required: apt-get install -y chromium")
    model = attnviz.load_model()
    words = marker_words(model.tokenizer, max(sessions) * (rounds + 1))
    levels = []
    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        try:
            for n in sessions:
                level = await run_level(n, rounds, browser, model, words, env, timeout)
                print(row(level), flush=True)
                levels.append(level)
        finally:
            await browser.close()
    return levels


# --- report ----------------------------------------------------------------------------------------------

HEADER = (
    "| sessions | new sentence → heatmap p50 | p95 | max | server RSS: idle → open → peak | server CPU | checked |\n"
    "|---:|---:|---:|---:|---|---:|---:|"
)


def row(v: Level) -> str:
    ok = f"{v.checked}/{v.sessions}" + (" **FAILED**" if v.failures else "")
    return (
        f"| {v.sessions} | {v.p50:.2f} s | {v.p95:.2f} s | {v.max:.2f} s | "
        f"{v.rss_idle_mb:.0f} → {v.rss_open_mb:.0f} → {v.rss_peak_mb:.0f} MB | {v.cpu_cores:.2f} cores | {ok} |"
    )


def table(levels: list[Level], note: str) -> str:
    return "\n".join([HEADER, *(row(v) for v in levels), "", note])


def write_docs(text: str) -> None:
    doc = DOCS.read_text()
    if BEGIN not in doc or END not in doc:
        raise SystemExit(f"{DOCS} has no {BEGIN} ... {END} section to replace")
    new = re.sub(re.escape(BEGIN) + r".*?" + re.escape(END), lambda _: f"{BEGIN}\n{text}\n{END}", doc, flags=re.DOTALL)
    DOCS.write_text(new)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sessions", type=int, nargs="+", default=[8, 16, 32])
    ap.add_argument("--rounds", type=int, default=3, help="bursts per level (each session: one new sentence each)")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds one page may take")
    ap.add_argument("--env", action="append", default=[], metavar="NAME=VALUE", help="extra server environment")
    ap.add_argument("--write-docs", action="store_true", help=f"replace the measured table in {DOCS.name}")
    args = ap.parse_args(argv)
    env = dict(kv.split("=", 1) for kv in args.env)
    levels = asyncio.run(run(args.sessions, args.rounds, env, args.timeout * 1000))
    rev = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], check=False, cwd=ROOT, capture_output=True, text=True
    ).stdout
    note = (
        f"Measured {time.strftime('%Y-%m-%d')} at commit {rev.strip() or '?'} by `python -m bench.load "
        f"--sessions {' '.join(map(str, args.sessions))} --rounds {args.rounds}`"
        f"{' with ' + ', '.join(args.env) if args.env else ''}: {os.cpu_count()} cores shared by the server and "
        f"Chromium, 1-minute load average before each level {', '.join(f'{v.load_avg:.1f}' for v in levels)}."
    )
    text = table(levels, note)
    print()
    print(text)
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "load.json").write_text(json.dumps([asdict(v) for v in levels], indent=1))
    for v in levels:
        for f in v.failures:
            print(f"FAILED ({v.sessions} sessions): {f}", file=sys.stderr)
    if args.write_docs:
        write_docs(text)
    return 1 if any(v.failures for v in levels) else 0


if __name__ == "__main__":
    raise SystemExit(main())
