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
import base64
import json
import math
import os
import random
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
from urllib.parse import quote, urlencode

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

# Armed in the page before a new sentence is typed: in-page times (performance.now(), no driver overhead) of
# the Ctrl+Enter key press, of the script run starting and ending (the app's script-state attribute), and, set
# by DRAWN, of the heatmaps being drawn. The clock starts at the key press, or at the run's start should the
# text area have sent the new text before the key press reached the page (on a busy host, it can).
ARM = """() => {
    const t = window.__lt = {};
    const box = document.querySelector("textarea[aria-label='Sentence']");
    box.addEventListener('keydown', e => { if (e.key === 'Enter' && e.ctrlKey && t.press === undefined)
        t.press = performance.now(); }, {capture: true});
    const app = document.querySelector("[data-testid='stApp']");
    const attr = 'data-test-script-state';
    const obs = new MutationObserver(records => {
        const now = performance.now();  // every state the attribute passed through since the last callback
        for (const state of [...records.slice(1).map(r => r.oldValue), app.getAttribute(attr)]) {
            if (state === 'running' && t.running === undefined) t.running = now;
            if (t.running !== undefined && state === 'notRunning' && t.done === undefined) t.done = now;
        }
        if (t.done !== undefined) obs.disconnect();
    });
    obs.observe(app, {attributes: true, attributeFilter: [attr], attributeOldValue: true});
}"""

# True once the page has finished its run and drawn the grid and the single head with `word` among the tokens.
DRAWN = """([word]) => {
    if (!document.querySelector("[data-testid='stApp'][data-test-script-state='notRunning']")) return false;
    const want = new Set(['head_grid', 'head_detail']);
    const drawn = Array.from(document.querySelectorAll('.js-plotly-plot')).filter(gd =>
        gd._fullLayout && gd.querySelector('.main-svg') && want.has(((gd.layout || {}).meta || {}).figure) &&
        ((gd.layout.yaxis || {}).ticktext || []).some(t => String(t).endsWith(' ' + word)));
    if (drawn.length < 2) return false;
    if (window.__lt && window.__lt.drawn === undefined) window.__lt.drawn = performance.now();
    return true;
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
    spread: float  # 0: every session submits at the same instant; else each at a random time within `spread` s
    client: str = "browser"  # "browser" (Chromium) or "protocol" (Streamlit's websocket protocol, no browser)
    latencies: list[float] = field(default_factory=list)  # key press -> heatmaps drawn (what a person waits)
    runs: list[float] = field(default_factory=list)  # key press -> the script run has ended (the server's part)
    run_p50: float = 0.0
    run_p95: float = 0.0
    run_max: float = 0.0
    p50: float = 0.0
    p95: float = 0.0
    max: float = 0.0
    rss_idle_mb: float = 0.0  # server started, no session yet
    rss_open_mb: float = 0.0  # all N sessions open on their first sentence
    rss_peak_mb: float = 0.0  # highest sample during the bursts
    rss_after_mb: float = 0.0  # after the last burst, sessions still open
    cpu_seconds: float = 0.0  # server CPU time used during the bursts
    cpu_cores: float = 0.0  # server CPU seconds / wall seconds during the bursts
    cpu_per_run: float = 0.0  # server CPU seconds per new sentence (does not depend on how busy the host is)
    load_avg: float = 0.0  # the machine's 1-minute load average before the level (other work on the host)
    checked: int = 0  # pages whose tokens and numbers matched their own trace
    failures: list[str] = field(default_factory=list)


# --- the server ------------------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(port: int, log: Path, env: dict[str, str], nice: int = 0) -> subprocess.Popen:
    """scripts/serve.sh with this interpreter's venv first on PATH (the script runs `python`, as the image does).

    nice < 0 (root only) puts the server ahead of other work on a shared host, as if it had its cores to itself.
    """
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    full = dict(os.environ, PATH=path, PORT=str(port), ATTNVIZ_ADDRESS="127.0.0.1", HF_HUB_OFFLINE="1", **env)
    cmd = ["nice", "-n", str(nice), str(SERVE)] if nice else [str(SERVE)]  # nice execs the script, it execs python
    proc = subprocess.Popen(cmd, cwd=ROOT, env=full, stdout=log.open("w"), stderr=subprocess.STDOUT)
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


# --- clients: a real browser, or Streamlit's own websocket protocol ------------------------------------------


class BrowserClient:
    """One Chromium, one context per session: what a person sees, drawing included."""

    name = "browser"

    def __init__(self, browser, timeout: float):
        self.browser, self.timeout, self.contexts = browser, timeout, []

    async def open(self, base: str, text: str, word: str):
        ctx = await self.browser.new_context(viewport={"width": 1280, "height": 900})
        self.contexts.append(ctx)
        page = await ctx.new_page()
        page.set_default_timeout(self.timeout)
        await page.goto(f"{base}/?text={quote(text)}", wait_until="domcontentloaded")
        await self.wait_drawn(page, word)
        return page

    async def wait_drawn(self, page, word: str) -> None:
        await page.wait_for_function(DRAWN, arg=[word], timeout=self.timeout, polling=50)

    async def submit(self, page, text: str, word: str) -> tuple[float, float | None]:
        """Type `text` into the sidebar and press Ctrl+Enter: seconds until the run ended, and until drawn."""
        box = page.locator("textarea[aria-label='Sentence']")
        await page.evaluate(ARM)
        await box.fill(text)
        await box.press("Control+Enter")
        await self.wait_drawn(page, word)
        t = await page.evaluate("() => window.__lt")
        start = min(t.get("press", math.inf), t.get("running", math.inf))
        if not math.isfinite(start):
            raise RuntimeError(f"no key press or script run recorded for {text!r}: {t}")
        # on a saturated host the observer can miss a whole run between two callbacks: the run then ended by
        # the time the new heatmaps were drawn, which bounds it from above
        done = t.get("done", t["drawn"])
        return (done - start) / 1000, (t["drawn"] - start) / 1000

    async def shown(self, page) -> dict:
        return await page.evaluate(SHOWN)

    async def close(self) -> None:
        for c in self.contexts:
            await c.close()


class ProtocolClient:
    """Sessions without a browser: Streamlit's websocket protocol (the BackMsg/ForwardMsg protobufs the
    frontend sends and receives), so that only the server's time is measured and many sessions cost nothing
    on the client side. A new sentence is the text area's new value in a rerun request, as the frontend
    sends it; the run has ended when the server sends `script_finished`."""

    name = "protocol"

    def __init__(self, timeout: float):
        self.timeout, self.sockets = timeout / 1000, []

    async def open(self, base: str, text: str, word: str):
        import websockets

        ws = await websockets.connect(
            base.replace("http://", "ws://") + "/_stcore/stream", subprotocols=["streamlit"], max_size=2**28
        )
        self.sockets.append(ws)
        session = {"ws": ws}
        await self._run(session, text, widget=False)
        if "text_id" not in session:
            raise RuntimeError("the page has no 'Sentence' text area")
        return session

    async def _run(self, session: dict, text: str, widget: bool = True) -> None:
        from streamlit.proto.BackMsg_pb2 import BackMsg
        from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
        from streamlit.proto.WidgetStates_pb2 import WidgetState

        back = BackMsg()
        back.rerun_script.query_string = urlencode({"text": text})
        if widget:
            back.rerun_script.widget_states.widgets.append(WidgetState(id=session["text_id"], string_value=text))
        session["charts"] = []
        await session["ws"].send(back.SerializeToString())
        async with asyncio.timeout(self.timeout):
            while True:
                msg = ForwardMsg()
                msg.ParseFromString(await session["ws"].recv())
                kind = msg.WhichOneof("type")
                if kind == "delta" and msg.delta.WhichOneof("type") == "new_element":
                    el = msg.delta.new_element
                    if el.WhichOneof("type") == "text_area" and el.text_area.label == "Sentence":
                        session["text_id"] = el.text_area.id
                    elif el.WhichOneof("type") == "plotly_chart":
                        session["charts"].append(json.loads(el.plotly_chart.spec))
                elif kind == "script_finished":
                    if msg.script_finished != ForwardMsg.FINISHED_SUCCESSFULLY:
                        raise RuntimeError(f"script run ended with status {msg.script_finished}")
                    return

    async def submit(self, session: dict, text: str, word: str) -> tuple[float, float | None]:
        t0 = time.perf_counter()
        await self._run(session, text)
        return time.perf_counter() - t0, None

    async def shown(self, session: dict) -> dict:
        import numpy as np

        def fig(name):
            return next(f for f in session["charts"] if f["layout"].get("meta", {}).get("figure") == name)

        z = next(t for t in fig("head_grid")["data"] if t["type"] == "heatmap")["z"]
        if isinstance(z, dict):  # a typed array: {"dtype": "f4", "bdata": ..., "shape": "13, 13"}
            a = np.frombuffer(base64.b64decode(z["bdata"]), np.dtype(z["dtype"]).newbyteorder("<"))
            z = a.reshape([int(x) for x in str(z["shape"]).split(",")]).tolist()
        return {"ticks": fig("head_detail")["layout"]["yaxis"]["ticktext"], "z": z, "errors": 0}

    async def close(self) -> None:
        for ws in self.sockets:
            await ws.close()


# --- one level: N sessions -------------------------------------------------------------------------------


async def run_level(n: int, rounds: int, spread: float, client, model, words: list[str], env: dict, nice: int) -> Level:
    import numpy as np

    import attnviz

    rng = random.Random(n)
    level = Level(sessions=n, rounds=rounds, spread=spread, client=client.name, load_avg=os.getloadavg()[0])
    port = free_port()
    OUT.mkdir(parents=True, exist_ok=True)
    proc = start(port, OUT / f"load-server-{client.name}-{n}.log", env, nice)
    base = f"http://127.0.0.1:{port}"

    async def later(delay, job):
        await asyncio.sleep(delay)
        return await job

    try:
        level.rss_idle_mb = rss_mb(proc.pid)
        # every session opens on its own first sentence; they load concurrently
        first = [(sentence(i, words[i * (rounds + 1)]), words[i * (rounds + 1)]) for i in range(n)]
        sessions = await asyncio.gather(*(client.open(base, t, w) for t, w in first))
        level.rss_open_mb = rss_mb(proc.pid)

        sampler = Sampler(proc.pid)
        cpu0, wall0 = cpu_seconds(proc.pid), time.perf_counter()
        final: list[tuple[str, str]] = []
        for r in range(1, rounds + 1):
            jobs = [(sentence(i, words[i * (rounds + 1) + r]), words[i * (rounds + 1) + r]) for i in range(n)]
            delays = [rng.uniform(0, spread) for _ in jobs]
            times = await asyncio.gather(
                *(later(d, client.submit(s, t, w)) for s, (t, w), d in zip(sessions, jobs, delays))
            )
            level.runs.extend(run for run, _ in times)
            level.latencies.extend(drawn for _, drawn in times if drawn is not None)
            final = jobs
        level.cpu_seconds = cpu_seconds(proc.pid) - cpu0
        level.cpu_cores = level.cpu_seconds / (time.perf_counter() - wall0)
        sampler.stop()
        level.rss_peak_mb = max(sampler.peak, rss_mb(proc.pid))
        level.rss_after_mb = rss_mb(proc.pid)

        # each session shows its own sentence: its tokens, and its own numbers (layer 0, head 0)
        all_words = {w for _, w in final}
        for i, (session, (text, word)) in enumerate(zip(sessions, final)):
            shown = await client.shown(session)
            tr = attnviz.trace(model, text)
            labels = [str(t).split(" ", 1)[1] for t in shown["ticks"]]
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
        await client.close()
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
    if level.latencies:
        level.p50, level.p95, level.max = percentiles(level.latencies)
    level.run_p50, level.run_p95, level.run_max = percentiles(level.runs)
    level.cpu_per_run = level.cpu_seconds / max(1, len(level.runs))
    return level


def percentiles(values: list[float]) -> tuple[float, float, float]:
    """p50, p95 (nearest rank) and max."""
    v = sorted(values)
    return statistics.median(v), v[min(len(v) - 1, max(0, math.ceil(0.95 * len(v)) - 1))], v[-1]


async def run(
    sessions: list[int], rounds: int, spreads: list[float], env: dict, timeout: float, nice: int, client: str
) -> list[Level]:
    from playwright.async_api import async_playwright

    import attnviz

    model = attnviz.load_model()
    words = marker_words(model.tokenizer, max(sessions) * (rounds + 1))
    levels = []

    async def each(make):
        for spread in spreads:
            for n in sessions:
                level = await run_level(n, rounds, spread, make(), model, words, env, nice)
                print(row(level), flush=True)
                levels.append(level)

    if client == "protocol":
        await each(lambda: ProtocolClient(timeout))
        return levels
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        raise SystemExit("Debian's chromium is required: apt-get install -y chromium")
    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        try:
            await each(lambda: BrowserClient(browser, timeout))
        finally:
            await browser.close()
    return levels


# --- report ----------------------------------------------------------------------------------------------

HEADERS = {
    "browser": "| sessions | new sentences sent | → heatmaps drawn, p50 | p95 | max | → run ended, p50 | p95 "
    "| server CPU per sentence | server cores busy | server RSS: idle → open → peak | own view checked |\n"
    "|---:|---|---:|---:|---:|---:|---:|---:|---:|---|---:|",
    "protocol": "| sessions | new sentences sent | → run ended, p50 | p95 | max "
    "| server CPU per sentence | server cores busy | server RSS: idle → open → peak | own view checked |\n"
    "|---:|---|---:|---:|---:|---:|---:|---|---:|",
}
MARKERS = {"browser": "load", "protocol": "load-protocol"}  # <!-- load:begin --> ... <!-- load:end --> in docs


def sent(v: Level) -> str:
    return "all at once" if v.spread == 0 else f"each within {v.spread:g} s"


def row(v: Level) -> str:
    ok = f"{v.checked}/{v.sessions}" + (" **FAILED**" if v.failures else "")
    drawn = f"{v.p50:.2f} s | {v.p95:.2f} s | {v.max:.2f} s | " if v.client == "browser" else ""
    run_max = f" | {v.run_max:.2f} s" if v.client == "protocol" else ""
    return (
        f"| {v.sessions} | {sent(v)} | {drawn}{v.run_p50:.2f} s | {v.run_p95:.2f} s{run_max} "
        f"| {v.cpu_per_run:.2f} s | {v.cpu_cores:.2f} "
        f"| {v.rss_idle_mb:.0f} → {v.rss_open_mb:.0f} → {v.rss_peak_mb:.0f} MB | {ok} |"
    )


def table(client: str, levels: list[Level], note: str) -> str:
    return "\n".join([HEADERS[client], *(row(v) for v in levels), "", note])


def write_docs(client: str, text: str) -> None:
    begin, end = f"<!-- {MARKERS[client]}:begin -->", f"<!-- {MARKERS[client]}:end -->"
    doc = DOCS.read_text()
    if begin not in doc or end not in doc:
        raise SystemExit(f"{DOCS} has no {begin} ... {end} section to replace")
    new = re.sub(re.escape(begin) + r".*?" + re.escape(end), lambda _: f"{begin}\n{text}\n{end}", doc, flags=re.DOTALL)
    DOCS.write_text(new)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sessions", type=int, nargs="+", default=[8, 16, 32])
    ap.add_argument("--rounds", type=int, default=3, help="rounds per level (each session: one new sentence each)")
    ap.add_argument(
        "--spread", type=float, nargs="+", default=[0.0],
        help="0: all sessions submit at once (a burst); S > 0: each at a random moment within S seconds",
    )  # fmt: skip
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds one page may take")
    ap.add_argument(
        "--client", choices=["browser", "protocol"], default="browser",
        help="browser: Chromium, drawing included; protocol: Streamlit's websocket protocol, the server's time only",
    )  # fmt: skip
    ap.add_argument("--nice", type=int, default=0, help="server niceness (negative: ahead of other work; root)")
    ap.add_argument("--env", action="append", default=[], metavar="NAME=VALUE", help="extra server environment")
    ap.add_argument("--write-docs", action="store_true", help=f"replace the measured table in {DOCS.name}")
    args = ap.parse_args(argv)
    env = dict(kv.split("=", 1) for kv in args.env)
    levels = asyncio.run(run(args.sessions, args.rounds, args.spread, env, args.timeout * 1000, args.nice, args.client))
    rev = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], check=False, cwd=ROOT, capture_output=True, text=True
    ).stdout
    note = (
        f"Measured {time.strftime('%Y-%m-%d')} at commit {rev.strip() or '?'} by `python -m bench.load "
        f"--client {args.client} --sessions {' '.join(map(str, args.sessions))} --rounds {args.rounds} "
        f"--spread {' '.join(f'{x:g}' for x in args.spread)}{f' --nice {args.nice}' if args.nice else ''}`"
        f"{' with ' + ', '.join(args.env) if args.env else ''}: {os.cpu_count()} cores shared by the server"
        f"{' and Chromium' if args.client == 'browser' else ''} and other work on the host; its 1-minute load average "
        f"before each level: {', '.join(f'{v.load_avg:.1f}' for v in levels)}."
    )
    text = table(args.client, levels, note)
    print()
    print(text)
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / f"load-{args.client}.json").write_text(json.dumps([asdict(v) for v in levels], indent=1))
    for v in levels:
        for f in v.failures:
            print(f"FAILED ({v.sessions} sessions): {f}", file=sys.stderr)
    if args.write_docs:
        write_docs(args.client, text)
    return 1 if any(v.failures for v in levels) else 0


if __name__ == "__main__":
    raise SystemExit(main())
