"""The dashboard in Debian's Chromium: `streamlit run app.py`, driven with Playwright's sync API.

Times are taken inside the page with performance.now(): a keydown listener stamps the key press, a
MutationObserver stamps the first change inside a Plotly chart after it (the first heatmap drawn) and the
moment the app's script state returns to notRunning (the run is over).
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from bench.cpu import sentence
from bench.measure import ms

ROOT = Path(__file__).resolve().parents[1]
FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update"]
FLAGS += ["--disable-sync", "--no-first-run"]
IDLE = "[data-testid='stApp'][data-test-script-state='notRunning']"
CHART = ".js-plotly-plot .main-svg"
PROBE = """(() => {
  const b = window.__bench = {t0: 0, first: 0, running: false, done: 0};
  addEventListener('keydown', (e) => {
    if (e.key === 'Enter' || e.key.startsWith('Arrow')) Object.assign(b, {t0: performance.now(), first: 0, done: 0});
  }, true);
  const el = (r) => (r.target.nodeType === 1 ? r.target : r.target.parentElement);
  new MutationObserver((records) => {
    const now = performance.now();
    for (const r of records) {
      if (b.t0 && !b.first && el(r) && el(r).closest('.js-plotly-plot')) b.first = now;
      if (r.attributeName === 'data-test-script-state' && el(r).getAttribute('data-testid') === 'stApp') {
        const state = el(r).getAttribute('data-test-script-state');
        if (state === 'running') b.running = true;
        if (state === 'notRunning' && b.running && b.t0) Object.assign(b, {running: false, done: now});
      }
    }
  }).observe(document, {subtree: true, childList: true, attributes: true, characterData: true});
})();"""


def start_server(log: Path, timeout: float = 120) -> tuple[subprocess.Popen, str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cmd = [sys.executable, "-m", "streamlit", "run", "app.py", "--server.headless", "true", "--server.port", str(port)]
    cmd += ["--browser.gatherUsageStats", "false", "--server.fileWatcherType", "none"]
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("w") as out:
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)
    url, deadline = f"http://127.0.0.1:{port}", time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            with urllib.request.urlopen(url + "/_stcore/health", timeout=2) as r:
                if r.read().strip() == b"ok":
                    return proc, url
        except OSError:
            time.sleep(0.2)
    proc.terminate()
    raise RuntimeError(f"streamlit did not become healthy; see {log}")


def _open(browser, url: str):
    """A fresh browser context on the Heads page; counts WebSocket bytes received in page.ws_bytes."""
    page = browser.new_context(viewport={"width": 1400, "height": 1000}).new_page()
    page.add_init_script(PROBE)
    page.set_default_timeout(180_000)
    page.ws_bytes = 0

    def count(payload):
        page.ws_bytes += len(payload if isinstance(payload, bytes) else payload.encode())

    page.on("websocket", lambda ws: ws.on("framereceived", count))
    t = time.perf_counter()
    page.goto(url + "/")
    page.wait_for_selector(CHART)
    page.wait_for_selector(IDLE)
    return page, time.perf_counter() - t


def _act(page, press) -> tuple[float, float]:
    """(seconds to the first chart change, seconds to the end of the script run) after press()."""
    press()
    page.wait_for_function("() => window.__bench.first > 0 && window.__bench.done > 0")
    page.wait_for_selector(IDLE)
    b = page.evaluate("window.__bench")
    return (b["first"] - b["t0"]) / 1000, (b["done"] - b["t0"]) / 1000


def _new_sentence(page, text: str) -> tuple[float, float]:
    box = page.locator("textarea[aria-label='Sentence']")
    box.fill(text)
    return _act(page, lambda: box.press("Control+Enter"))


def _layer_change(page, key: str) -> tuple[float, float]:
    slider = page.locator("[data-testid='stSidebar']").get_by_role("slider").first
    return _act(page, lambda: slider.press(key))


def _measure(browser, url: str, rounds: int, warmup: int, n_tokens: int, bytes_text: str) -> dict:
    page, first_load = _open(browser, url)
    times = {"sentence_s": [], "sentence_done_s": [], "layer_s": [], "layer_done_s": []}
    for r in range(warmup + rounds):
        key = ("ArrowRight", "ArrowLeft")[r % 2]  # layer 0 -> 1 -> 0 ...
        got = _new_sentence(page, sentence(n_tokens, seed=100 + r)) + _layer_change(page, key)
        for key, seconds in zip(times, got):
            times[key] += [seconds] if r >= warmup else []
    page.ws_bytes = 0
    _new_sentence(page, bytes_text)
    out = {key: ms(v) / 1000 for key, v in times.items()}
    return {"chromium": browser.version, "first_load_s": first_load, "page_bytes": page.ws_bytes, **out}


def run(rounds: int = 5, warmup: int = 1, n_tokens: int = 32, bytes_tokens: int = 128) -> dict:
    """Median seconds from Ctrl+Enter on a new sentence / an arrow key on the layer slider, and the bytes
    the Heads page receives for a sentence of bytes_tokens tokens against bertviz's for the same attention."""
    from playwright.sync_api import sync_playwright

    import attnviz

    text = sentence(bytes_tokens, seed=7)
    proc, url = start_server(ROOT / "bench" / "out" / "streamlit.log")
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=shutil.which("chromium"), args=FLAGS)
            res = _measure(browser, url, rounds, warmup, n_tokens, text)
            browser.close()
    finally:
        proc.terminate()
        proc.wait(30)
    trace = attnviz.trace(attnviz.load_model(), text)
    bertviz = bertviz_bytes(trace.weights, trace.tokens)
    res.update(tokens=n_tokens, rounds=rounds, bytes_tokens=trace.n_tokens, bertviz_bytes=bertviz)
    return {**res, "bertviz_vs_page": bertviz / res["page_bytes"]}


def bertviz_bytes(weights, tokens) -> int:
    """Bytes of bertviz 1.4.1's head_view(attention, tokens, html_action="return") HTML, built as it builds it: the
    params JSON (every layer's attention as nested lists) replaces PYTHON_PARAMS in head_view.js, which names it
    twice (in the code and in a comment), inside 14,293 fixed bytes of HTML and JS. Checked to the byte against
    bertviz 1.4.1 at 8 to 128 tokens (it is not a dependency: its head_view needs IPython)."""
    attn = [{"name": None, "attn": weights.tolist(), "left_text": list(tokens), "right_text": list(tokens)}]
    params = {"attention": attn, "default_filter": "0", "root_div_id": "bertviz-" + 32 * "0", "layer": None}
    params |= {"heads": None, "include_layers": list(range(len(weights)))}
    return 2 * len(json.dumps(params).encode()) + 14_293
