"""Browser benches: the real dashboard (`streamlit run app.py`) in Debian's Chromium, driven by Playwright.

Timing is taken *inside the page* with performance.now(): a capture-phase keydown listener stamps the
moment the user acts (Ctrl+Enter in the sentence box, an arrow key on the layer slider), a MutationObserver
stamps every DOM change inside a Plotly chart, and another one watches the app's script state. An
interaction counts as drawn when the script has run and finished after the key press, every heatmap is
present, nothing is stale and no chart has changed for QUIET_MS; its time is the last chart change minus
the key press. The server is always the project's own environment (.venv), never the bench one.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

from .stats import MB, Summary, rss

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "out"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
IDLE = "[data-testid='stApp'][data-test-script-state='notRunning']"
HEATMAP = ".js-plotly-plot g.hm image"  # plotly.js draws each heatmap trace as an <image> inside g.hm
QUIET_MS = 600

# Installed before any page script: stamps for the key press, the script state and chart mutations.
PROBE = """
(() => {
  window.__bench = {t0: null, lastPlot: 0, runs: 0, started: 0, done: 0, long: []};
  const b = window.__bench;
  try {  // main-thread tasks over 50 ms: how long the browser itself was busy (parsing, Plotly drawing)
    new PerformanceObserver((list) => {
      for (const e of list.getEntries()) { b.long.push([e.startTime, e.duration]); }
    }).observe({type: 'longtask', buffered: true});
  } catch (e) {}
  window.addEventListener('keydown', (e) => {
    if ((e.key === 'Enter' && (e.ctrlKey || e.metaKey)) || e.key === 'ArrowRight' || e.key === 'ArrowLeft') {
      b.t0 = performance.now();
    }
  }, true);
  const watch = () => {
    new MutationObserver((records) => {
      const now = performance.now();
      for (const r of records) {
        const el = r.target.nodeType === 1 ? r.target : r.target.parentElement;
        if (el && el.closest && el.closest('.js-plotly-plot')) { b.lastPlot = now; }
        if (el && r.type === 'attributes' && r.attributeName === 'data-test-script-state'
            && el.getAttribute('data-testid') === 'stApp') {
          const state = el.getAttribute('data-test-script-state');
          if (state === 'running') { b.started = now; }
          if (state === 'notRunning' && b.started) { b.done = now; b.runs += 1; }
        }
      }
    }).observe(document.documentElement, {subtree: true, childList: true, attributes: true, characterData: true});
  };
  if (document.documentElement) { watch(); } else { document.addEventListener('DOMContentLoaded', watch); }
})();
"""


def chromium_path() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser") or "/usr/bin/chromium"
    if not os.path.exists(path):
        raise RuntimeError("Debian's chromium is required for the browser benches: apt-get install -y chromium")
    return path


def app_python() -> str:
    """The project's interpreter: the server must not see the bench environment's extra packages."""
    main = ROOT / ".venv" / "bin" / "python"
    return str(main) if main.exists() else sys.executable


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Server:
    """`streamlit run app.py` as the README starts it, logging to a file, timed from the Popen."""

    log: Path
    env: dict = field(default_factory=dict)
    args: tuple = ()  # extra `streamlit run` options, e.g. ("--runner.postScriptGC", "false")
    root: Path = ROOT  # the checkout to serve (a patched copy for what-if experiments)
    port: int = 0
    proc: subprocess.Popen | None = None
    t_start: float = 0.0
    t_healthy: float = 0.0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 120) -> "Server":
        self.port = self.port or free_port()
        env = dict(os.environ, HF_HUB_OFFLINE="1", PYTHONUNBUFFERED="1", **self.env)
        env.pop("PYTHONPATH", None)
        cmd = [
            app_python(), "-m", "streamlit", "run", "app.py", "--server.headless", "true",
            "--server.port", str(self.port), "--server.address", "127.0.0.1",
            "--browser.gatherUsageStats", "false", "--server.fileWatcherType", "none", *self.args,
        ]  # fmt: skip
        self.log.parent.mkdir(parents=True, exist_ok=True)
        self.t_start = time.perf_counter()
        self.proc = subprocess.Popen(cmd, cwd=self.root, env=env, stdout=self.log.open("w"), stderr=subprocess.STDOUT)
        deadline = self.t_start + timeout
        while time.perf_counter() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"streamlit exited early; see {self.log}:\n{self.log.read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(f"{self.url}/_stcore/health", timeout=2) as r:
                    if r.read().decode().strip() == "ok":
                        self.t_healthy = time.perf_counter()
                        return self
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"streamlit did not become healthy in {timeout} s; see {self.log}")

    def rss(self) -> int:
        return rss(self.proc.pid)

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.terminate()  # only the process this bench started, by its own handle
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)


class Tab:
    """One browser context + page with the timing probe installed."""

    def __init__(self, browser, base: str, timeout_ms: float = 180_000):
        self.context = browser.new_context(viewport={"width": 1400, "height": 1000})
        self.context.add_init_script(PROBE)
        self.page = self.context.new_page()
        self.page.set_default_timeout(timeout_ms)
        self.base = base
        self.ws_bytes = 0
        self.ws_frames = 0
        self.page.on("websocket", self._on_ws)

    def _on_ws(self, ws) -> None:
        def got(payload):
            self.ws_frames += 1
            self.ws_bytes += len(payload) if isinstance(payload, (bytes, bytearray)) else len(payload.encode("utf-8"))

        ws.on("framereceived", got)

    def open(self, query: str = "", min_heatmaps: int = 1) -> float:
        """Load the page and wait until it is drawn; seconds from navigation start to the last chart change."""
        self.page.goto(f"{self.base}/{query}", wait_until="domcontentloaded")
        self.settle(min_heatmaps=min_heatmaps, since=None, after_action=False)
        return self.page.evaluate("window.__bench.lastPlot") / 1000

    def heatmaps(self) -> int:
        return self.page.locator(HEATMAP).count()

    def settle(
        self, min_heatmaps: int = 1, since: float | None = None, after_action: bool = True, timeout_ms: float = 180_000
    ) -> None:
        """Wait: a script run finished after the key press, >= min_heatmaps drawn, nothing stale, charts quiet.

        after_action=False (a page load): no key press to wait for, only the rest.
        """
        since = ("window.__bench.t0" if since is None else str(since)) if after_action else "-1"
        self.page.wait_for_function(
            f"""() => {{
                const b = window.__bench;
                const app = document.querySelector("[data-testid='stApp']");
                if (!app || app.getAttribute('data-test-script-state') !== 'notRunning') return false;
                if ({"true" if after_action else "false"} && !(b.done > {since})) return false;
                if (document.querySelectorAll("{HEATMAP}").length < {min_heatmaps}) return false;
                if (document.querySelector("[data-stale='true']")) return false;
                return performance.now() - Math.max(b.lastPlot, b.done) > {QUIET_MS};
            }}""",
            timeout=timeout_ms,
            polling=100,
        )

    def elapsed(self) -> float:
        """Seconds from the key press to the last chart change."""
        b = self.page.evaluate("window.__bench")
        self.script_s = (b["done"] - b["t0"]) / 1000  # key press to the script's run finished (server side + network)
        self.started_s = (b["started"] - b["t0"]) / 1000  # key press to the app showing "running"
        self.busy_s = (
            sum(  # browser main thread in long tasks between the key press and the last chart change
                max(0.0, min(s + d, b["lastPlot"]) - max(s, b["t0"])) for s, d in b["long"]
            )
            / 1000
        )
        return (b["lastPlot"] - b["t0"]) / 1000

    def new_sentence(self, text: str, min_heatmaps: int) -> float:
        area = self.page.locator("[data-testid='stSidebar'] textarea").first
        area.fill(text)
        area.press("Control+Enter")
        self.settle(min_heatmaps)
        return self.elapsed()

    def change_layer(self, key: str, min_heatmaps: int) -> float:
        slider = self.page.locator("[data-testid='stSidebar'] [data-testid='stSlider'] input[type='range']").first
        slider.focus()
        slider.press(key)
        self.settle(min_heatmaps)
        return self.elapsed()

    def layer(self) -> int:
        slider = self.page.locator("[data-testid='stSidebar'] [data-testid='stSlider'] input[type='range']").first
        return int(slider.input_value())

    def errors(self) -> list[str]:
        return self.page.locator("[data-testid='stException'], [data-testid='stError']").all_inner_texts()

    def close(self) -> None:
        self.context.close()


def _q(text: str) -> str:
    return "?text=" + quote(text)


def launch(playwright):
    return playwright.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)


# --- the benches -------------------------------------------------------------------------------------------


def cold_start(browser, runs: int = 3) -> dict:
    """`streamlit run app.py` to the first heatmap drawn, a fresh server each run (the browser is already up)."""
    healthy, drawn = [], []
    for i in range(runs):
        server = Server(OUT / f"cold-{i}.log")
        try:
            server.start()
            tab = Tab(browser, server.url)
            tab.page.goto(server.url + "/", wait_until="domcontentloaded")
            tab.page.wait_for_selector(HEATMAP, state="attached")
            t_first = time.perf_counter()
            healthy.append(server.t_healthy - server.t_start)
            drawn.append(t_first - server.t_start)
            tab.close()
        finally:
            server.stop()
    out = dict(healthy=Summary.of(healthy).to_dict(), first_heatmap=Summary.of(drawn).to_dict(), target_s=15.0)
    out["pass"] = out["first_heatmap"]["median"] < out["target_s"]
    return out


def interaction_times(browser, servers: dict, tokenizer, n_tokens: int = 20, rounds: int = 10, warmup: int = 2) -> dict:
    """Warm servers: a new sentence (uncached trace) and a layer change (cached trace), alternating.

    `servers` maps a label to a running Server; with several (e.g. one with a config change), their
    rounds alternate so they see the same machine load, and each variant gets its own numbers.
    """
    from .text import make_text

    tabs, expect, res = {}, {}, {}
    try:
        for label, server in servers.items():
            tabs[label] = Tab(browser, server.url)
            tabs[label].open(_q(make_text(tokenizer, n_tokens, seed=1000)))
            expect[label] = tabs[label].heatmaps()
            res[label] = {
                k: []
                for k in (
                    "sentence",
                    "layer",
                    "sentence_script",
                    "layer_script",
                    "sentence_start",
                    "layer_start",
                    "sentence_busy",
                    "layer_busy",
                )
            }
        for r in range(warmup + rounds):
            order = list(servers) if r % 2 == 0 else list(servers)[::-1]
            for label in order:
                tab, out = tabs[label], res[label]
                t_s = tab.new_sentence(make_text(tokenizer, n_tokens, seed=2000 + r), expect[label])
                s_s, s_0, s_b = tab.script_s, tab.started_s, tab.busy_s
                key = "ArrowRight" if tab.layer() == 0 else "ArrowLeft"
                t_l = tab.change_layer(key, expect[label])
                if r >= warmup:
                    out["sentence"].append(t_s)
                    out["layer"].append(t_l)
                    out["sentence_script"].append(s_s)
                    out["layer_script"].append(tab.script_s)
                    out["sentence_start"].append(s_0)
                    out["layer_start"].append(tab.started_s)
                    out["sentence_busy"].append(s_b)
                    out["layer_busy"].append(tab.busy_s)
        errors = {label: tab.errors() for label, tab in tabs.items()}
    finally:
        for tab in tabs.values():
            tab.close()
    variants = {}
    for label, out in res.items():
        v = dict(
            n_tokens=n_tokens,
            heatmaps_per_view=expect[label],
            new_sentence=Summary.of(out["sentence"]).to_dict(),
            layer_change=Summary.of(out["layer"]).to_dict(),
            new_sentence_script_done=Summary.of(out["sentence_script"]).to_dict(),
            layer_change_script_done=Summary.of(out["layer_script"]).to_dict(),
            new_sentence_script_started=Summary.of(out["sentence_start"]).to_dict(),
            layer_change_script_started=Summary.of(out["layer_start"]).to_dict(),
            new_sentence_browser_busy=Summary.of(out["sentence_busy"]).to_dict(),
            layer_change_browser_busy=Summary.of(out["layer_busy"]).to_dict(),
            targets_s={"new_sentence": 1.5, "layer_change": 0.8},
            page_errors=errors[label],
            server_args=list(servers[label].args),
        )
        v["pass"] = v["new_sentence"]["median"] < 1.5 and v["layer_change"]["median"] < 0.8
        variants[label] = v
    first = next(iter(variants))
    return {**variants[first], "variants": variants}


def page_bytes(browser, server: Server, tokenizer, sizes=(128, 512)) -> dict:
    """WebSocket bytes the Heads page receives while it renders a sentence of each size (fresh session each)."""
    from .text import make_text

    rows = {}
    for n in sizes:
        tab = Tab(browser, server.url)
        try:
            text = make_text(tokenizer, n, seed=3000 + n)
            t = tab.open(_q(text))
            rows[n] = dict(
                ws_bytes=tab.ws_bytes, ws_frames=tab.ws_frames, heatmaps=tab.heatmaps(), drawn_s=t, errors=tab.errors()
            )
        finally:
            tab.close()
    return rows


def sessions_memory(browser, tokenizer, n_sessions: int = 8, n_tokens: int = 128) -> dict:
    """Server RSS after one session traced a sentence, and after n_sessions did (all sessions stay open)."""
    from .text import make_text

    server = Server(OUT / "sessions.log").start()
    tabs = []
    try:
        time.sleep(1.0)
        rss_idle = server.rss()
        samples = []
        for i in range(n_sessions):
            tab = Tab(browser, server.url)
            tabs.append(tab)
            tab.open(_q(make_text(tokenizer, n_tokens, seed=4000 + i)))
            time.sleep(1.0)
            samples.append(server.rss())
        time.sleep(2.0)
        rss_all = server.rss()
    finally:
        for tab in tabs:
            tab.close()
        server.stop()
    growth = rss_all - samples[0]
    return dict(
        n_sessions=n_sessions,
        n_tokens=n_tokens,
        rss_idle_mb=rss_idle / MB,
        rss_after_each_mb=[s / MB for s in samples],
        rss_after_one_mb=samples[0] / MB,
        rss_after_all_mb=rss_all / MB,
        growth_mb=growth / MB,
        target_mb=300.0,
        **{"pass": growth / MB < 300.0},
    )
