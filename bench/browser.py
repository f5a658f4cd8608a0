"""The dashboard (scripts/serve.sh) in Debian's Chromium through Playwright: one session here, many in bench/load.py.
Timed inside the page from the key press to the end of the script run and to the heatmaps drawn anew."""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import shutil
import time
from functools import cache
from pathlib import Path
from urllib.parse import quote

import attnviz
from attnviz.hf import bundled_model_path
from bench.measure import OUT, ms, served
from bench.traces import sentence

FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update"]
FLAGS += ["--disable-sync", "--no-first-run", "--disable-quic"]
TIMEOUT_MS = 300_000  # for any wait in a page: a busy shared host can take minutes
# Armed before an action: the key press, and every script state the app passed through since (a busy host can
# deliver several changes of the attribute in one observer callback).
ARM = """() => {
  const t = window.__t = {}, app = document.querySelector("[data-testid='stApp']"), attr = 'data-test-script-state';
  addEventListener('keydown', e => { if (t.press === undefined) t.press = performance.now(); }, {capture: true});
  const obs = new MutationObserver(records => {
    const now = performance.now();
    for (const state of [...records.slice(1).map(r => r.oldValue), app.getAttribute(attr)]) {
      if (state === 'running' && t.running === undefined) t.running = now;
      if (t.running !== undefined && state === 'notRunning' && t.done === undefined) t.done = now;
    }
  });
  obs.observe(app, {attributes: true, attributeFilter: [attr], attributeOldValue: true});
}"""
# The run (the one after ARM, if armed) is over and the grid and the single head are drawn, showing `word` (when
# given) on layer `layer` (when given).
DRAWN = """([word, layer]) => {
  if (!document.querySelector("[data-testid='stApp'][data-test-script-state='notRunning']")) return false;
  // the run seen starting and not over yet (a short run can start and end within one render of the tab, so that its
  // running state never reaches the page: then the heatmaps' new layer or word below say the run is over)
  if (window.__t && window.__t.running !== undefined && window.__t.done === undefined) return false;
  const figs = Array.from(document.querySelectorAll('.js-plotly-plot')).filter(gd => gd._fullLayout &&
    gd.querySelector('.main-svg') && ['head_grid', 'head_detail'].includes(((gd.layout || {}).meta || {}).figure));
  if (figs.length < 2 || (layer !== null && figs.some(gd => gd.layout.meta.layer !== layer))) return false;
  const detail = figs.find(gd => gd.layout.meta.figure === 'head_detail');
  if (word !== null && !(detail.layout.yaxis.ticktext || []).some(t => String(t).endsWith(' ' + word))) return false;
  if (window.__t && window.__t.drawn === undefined) window.__t.drawn = performance.now();
  if (window.__t && window.__t.done === undefined) window.__t.done = window.__t.drawn;
  return true;
}"""


@contextlib.asynccontextmanager
async def chromium():
    """Debian's Chromium through Playwright, closed on the way out."""
    from playwright.async_api import async_playwright

    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        raise RuntimeError("Debian's chromium is required: apt-get install -y chromium")
    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=path, args=FLAGS)
        yield browser
        await browser.close()


async def open_page(browser, base: str, text: str, word: str):
    """A new browser context (its own session, no shared cookies) on the Heads page with `text`; counts the bytes
    its WebSocket receives in page.ws_bytes."""
    page = await (await browser.new_context(viewport={"width": 1280, "height": 900})).new_page()
    page.set_default_timeout(TIMEOUT_MS)
    page.ws_bytes = 0

    def count(data):
        page.ws_bytes += len(data if isinstance(data, bytes) else data.encode())

    page.on("websocket", lambda ws: ws.on("framereceived", count))
    await page.goto(f"{base}/?text={quote(text)}", wait_until="domcontentloaded")
    await page.wait_for_function(DRAWN, arg=[word, None], polling=50)
    return page


async def act(page, press, word: str | None = None, layer: int | None = None) -> tuple[float, float]:
    """Seconds from press() to the run's end and to the heatmaps drawn (the clock starts at the key press, or at
    the run's start should the new value have reached the server first)."""
    await page.evaluate(ARM)
    await press()
    await page.wait_for_function(DRAWN, arg=[word, layer], polling=50)
    t = await page.evaluate("() => window.__t")
    start = min(t.get("press", math.inf), t.get("running", math.inf))
    if not math.isfinite(start):
        raise RuntimeError(f"no key press or script run recorded: {t}")
    return (t["done"] - start) / 1000, (t["drawn"] - start) / 1000


async def new_sentence(page, text: str, word: str | None, after: float = 0) -> tuple[float, float]:
    await asyncio.sleep(after)
    box = page.locator("textarea[aria-label='Sentence']")
    await box.fill(text)
    return await act(page, lambda: box.press("Control+Enter"), word=word)


@cache
def _words() -> tuple[str, ...]:
    vocab = Path(bundled_model_path(), "vocab.txt").read_text(encoding="utf-8").split()
    return tuple(w for w in sorted(vocab) if w.isalpha() and w.isascii() and 6 <= len(w) <= 9)


def marker(i: int) -> tuple[str, str]:
    """Sentence i and a word only it has (a whole word of the bundled tokenizer, so the page shows it as one token)."""
    word = _words()[i]
    return f"Visitor {i} keeps thinking about the {word} all day.", word


async def run(rounds: int = 5, warmup: int = 1, bytes_tokens: int = 128) -> dict:
    """Median seconds from a new sentence and from a layer change to the heatmaps drawn, and the bytes the Heads
    page receives for a sentence of bytes_tokens tokens against bertviz's HTML for the same attention."""
    times = {"sentence_done_s": [], "sentence_s": [], "layer_done_s": [], "layer_s": []}
    with served(OUT / "browser-server.log") as (_, base):
        async with chromium() as browser:
            t0 = time.perf_counter()
            page = await open_page(browser, base, *marker(0))
            first_load = time.perf_counter() - t0
            slider = page.locator("[data-testid='stSidebar']").get_by_role("slider").first
            for r in range(warmup + rounds):
                key, layer = ("ArrowRight", 1) if r % 2 == 0 else ("ArrowLeft", 0)
                got = await new_sentence(page, *marker(r + 1))
                got += await act(page, lambda key=key: slider.press(key), layer=layer)
                for name, seconds in zip(times, got):
                    times[name] += [seconds] if r >= warmup else []
            page.ws_bytes = 0
            await new_sentence(page, sentence(bytes_tokens, seed=7), None)
            out = {"chromium": browser.version, "page_bytes": page.ws_bytes, "first_load_s": first_load}
    trace = attnviz.trace(attnviz.load_model(), sentence(bytes_tokens, seed=7))
    out |= {"rounds": rounds, "warmup": warmup, "bytes_tokens": trace.n_tokens}
    out |= {"bertviz_bytes": bertviz_bytes(trace.weights, trace.tokens)} | {k: ms(v) / 1000 for k, v in times.items()}
    return out | {"bertviz_vs_page": out["bertviz_bytes"] / out["page_bytes"]}


def bertviz_bytes(weights, tokens) -> int:
    """Bytes of bertviz 1.4.1's head_view(attention, tokens, html_action="return") HTML, built as it builds it: the
    params JSON (every layer's attention as nested lists) replaces PYTHON_PARAMS in head_view.js, which names it
    twice (in the code and in a comment), inside 14,293 fixed bytes of HTML and JS. Checked to the byte against
    bertviz 1.4.1 at 8 to 128 tokens (it is not a dependency: its head_view needs IPython)."""
    attn = [{"name": None, "attn": weights.tolist(), "left_text": list(tokens), "right_text": list(tokens)}]
    params = {"attention": attn, "default_filter": "0", "root_div_id": "bertviz-" + 32 * "0", "layer": None}
    params |= {"heads": None, "include_layers": list(range(len(weights)))}
    return 2 * len(json.dumps(params).encode()) + 14_293
