"""Helpers for the real-browser tests: start a streamlit server, wait for pages, read errors."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "test-output" / "screens"
#: The session server's log. Under pytest-xdist each worker that runs browser tests starts its own server (session
#: fixtures are per worker), so each writes its own log: streamlit-server-gw0.log, streamlit-server-gw1.log.
WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")
SERVER_LOG = OUT.parent / f"streamlit-server{'-' + WORKER if WORKER else ''}.log"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]
IDLE = "[data-testid='stApp'][data-test-script-state='notRunning']"
#: How often a wait_for_function reads the page, in ms. Playwright's default reads it on every animation frame, which
#: keeps Chromium drawing frames at 60 a second for the whole wait (measured: ~0.07 s of CPU per second waited, on a
#: page that is otherwise still; ~0.01 at 100 ms): on a two-core machine that CPU is taken from the server the test
#: waits for. A page that reaches the state is seen at most this much later.
POLL_MS = 100
#: Injected into every page of the test browser (browserkit.still): no CSS animation or transition is drawn. While a
#: script runs, Streamlit animates its running indicator, skeletons and fades, and Chromium draws those at 60 frames a
#: second for the whole run (measured: eight Heads pages loading at once cost Chromium 61 s of CPU, 47 s without them,
#: its GPU process 6.7 -> 2.3 s). No check reads an animation: they read the DOM, the address, geometry and pixels once
#: the run has ended and the layout has settled, which are the same (an animation's end state is drawn at once).
STILL_JS = """(() => {
  const style = document.createElement('style');
  style.textContent = '*, *::before, *::after { animation: none !important; transition: none !important; }';
  const add = () => (document.head || document.documentElement).appendChild(style);
  if (document.documentElement) add(); else document.addEventListener('DOMContentLoaded', add);
})()"""
#: the charts Plotly has drawn: each draws two or three `.main-svg` layers, so those are not counted
DRAWN_JS = "Array.from(document.querySelectorAll('.js-plotly-plot')).filter(g => g.querySelector('.main-svg')).length"

# Titles (figure title, subplot titles) that stick out of their chart's box are clipped on screen.
CLIPPED_TITLES_JS = """() => Array.from(document.querySelectorAll('.js-plotly-plot')).flatMap(gd => {
  const box = gd.getBoundingClientRect(), name = gd.layout.meta?.figure || 'chart';
  return Array.from(gd.querySelectorAll('.gtitle, .annotation-text, .g-xtitle text, .g-ytitle text, .cbtitle text'))
    .map(t => [t.textContent, t.getBoundingClientRect()])
    .filter(([_, r]) => r.width > 0 && (r.top < box.top - 1 || r.bottom > box.bottom + 1 || r.left < box.left - 1 || r.right > box.right + 1))
    .map(([text, r]) => `${name}: "${text.slice(0, 40)}" at top ${Math.round(r.top - box.top)}`);
})"""

# Titles, legend entries and notes under the modebar (Plotly's toolbar, shown at the chart's top right on hover):
# each is reported as 'figure: "text"'. The modebar is laid out (opacity 0) before the mouse comes.
UNDER_MODEBAR_JS = """() => Array.from(document.querySelectorAll('.js-plotly-plot')).flatMap(gd => {
  const bar = gd.querySelector('.modebar'), name = gd.layout.meta?.figure || 'chart';
  if (!bar) return [];
  const b = bar.getBoundingClientRect();
  return Array.from(gd.querySelectorAll('.gtitle, .annotation-text, .legendtext, .cbtitle text'))
    .map(t => [t.textContent, t.getBoundingClientRect()])
    .filter(([text, r]) => text.trim() && r.width > 0 && r.left < b.right && r.right > b.left && r.top < b.bottom && r.bottom > b.top)
    .map(([text]) => `${name}: "${text.slice(0, 40)}" under the modebar`);
})"""

# Text of a chart drawn over other text of the same chart: tick labels, titles, subplot titles, legend entries, colour
# bar labels, bar values. Each text's box is taken as drawn (a slanted tick label's four corners through its screen
# matrix) and pairs are tested with the separating-axis test, so slanted labels side by side are apart while their
# bounding rectangles overlap. Returns 'figure: "text" x "text"' per pair.
TEXT_OVERLAPS_JS = """() => {
  // Text boxes as drawn (rotated tick labels included: their corners through the screen matrix), tested pairwise
  // with the separating-axis test, so two -60° labels side by side are apart while their bounding rects overlap.
  const quad = e => { const b = e.getBBox(), m = e.getScreenCTM(), svg = e.ownerSVGElement;
    return [[b.x, b.y], [b.x + b.width, b.y], [b.x + b.width, b.y + b.height], [b.x, b.y + b.height]].map(([x, y]) => {
      const p = svg.createSVGPoint(); p.x = x; p.y = y; const q = p.matrixTransform(m); return [q.x, q.y]; }); };
  const apart = (P, Q) => [P, Q].some(R => R.some((p, i) => {
    const q = R[(i + 1) % 4], n = [q[1] - p[1], p[0] - q[0]], len = Math.hypot(...n) || 1;
    const proj = S => S.map(s => (s[0] * n[0] + s[1] * n[1]) / len);
    const a = proj(P), b = proj(Q);
    return Math.max(...a) - 1.5 <= Math.min(...b) || Math.max(...b) - 1.5 <= Math.min(...a); }));
  const sel = '.xtick text, .ytick text, .gtitle, .annotation-text, .g-xtitle text, .g-ytitle text, .legendtext, ' +
              '.cbtitle text, .cbaxis text, .bartext text, .bartext';
  return Array.from(document.querySelectorAll('.js-plotly-plot')).flatMap(gd => {
    const name = (gd.layout.meta || {}).figure || 'chart';
    const els = Array.from(new Set(gd.querySelectorAll(sel))).filter(e => e.tagName === 'text' &&
      (e.textContent || '').trim() && e.getBBox().width > 0 && getComputedStyle(e).opacity !== '0');
    const quads = els.map(quad), out = [];
    for (let i = 0; i < els.length; i++) for (let j = i + 1; j < els.length; j++)
      if (!apart(quads[i], quads[j])) out.push(`${name}: "${els[i].textContent.slice(0, 30)}" x "${els[j].textContent.slice(0, 30)}"`);
    return out;
  });
}"""


# The sidebar's link to a page (its pathname), clicked; then true once that page's own run has ended: another title,
# the app idle, the address on the page.
NAV_JS = """(path) => Array.from(document.querySelectorAll("[data-testid='stSidebarNav'] a"))
  .find(a => new URL(a.href).pathname === '/' + path).click()"""
ARRIVED_JS = """([path, before]) => location.pathname === '/' + path
  && document.querySelector("[data-testid='stMain'] h1")?.innerText !== before
  && document.querySelector("[data-testid='stApp']")?.getAttribute('data-test-script-state') === 'notRunning'"""


def still(browser):
    """Make every context `browser` opens still: prefers-reduced-motion (which parts of Streamlit honour) and
    STILL_JS in each of its pages. Returns `browser`."""
    made = browser.new_context

    def new_context(**options):
        context = made(**{"reduced_motion": "reduce", **options})
        context.add_init_script(script=STILL_JS)
        return context

    browser.new_context = new_context
    return browser


def chart_js(figure: str) -> str:
    """A JS expression for the chart whose layout.meta.figure is `figure` (undefined while there is none)."""
    return f"Array.from(document.querySelectorAll('.js-plotly-plot')).find(g => g.layout?.meta?.figure === '{figure}')"


def wait_drawn(page, charts: int = 1, timeout: float = 90_000) -> None:
    """Wait until at least `charts` Plotly charts on `page` have drawn (DRAWN_JS), read every POLL_MS."""
    page.wait_for_function(f"{DRAWN_JS} >= {charts}", timeout=timeout, polling=POLL_MS)


def open_profile(playwright, executable: str, folder: Path):
    """The test browser's own profile (a persistent context in `folder`), still as `still` makes a context.

    A tab in it is a new Streamlit session like any other (a session is a WebSocket, not a browser), but it finds
    Streamlit's and Plotly's scripts in the profile's HTTP cache, compiled in V8's code cache: a fresh context fetches
    and compiles them again, which cost a Heads page load ~2.6 s of CPU more (measured, per process: Chromium's
    renderer 4.0 -> 2.6 s, its browser process 0.7 -> 0.3, the server sending the static files 0.75 -> 0.25). Tests
    whose claim is a fresh browser (a link opened with no cookies, a first visit) still open their own context."""
    context = playwright.chromium.launch_persistent_context(
        str(folder), executable_path=executable, args=CHROMIUM_ARGS, reduced_motion="reduce"
    )
    context.add_init_script(script=STILL_JS)
    return context


def tab_in(profile, base: str, width: int = 1400, height: int = 1000, timeout: float = 90_000) -> Tab:
    """A new tab of the test browser's profile (`open_profile`) on `base`; close it with `tab.page.close()`."""
    page = profile.new_page()
    page.set_viewport_size({"width": width, "height": height})
    page.set_default_timeout(timeout)
    return Tab(page, base)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(port: int, log: Path, extra_env: dict | None = None) -> subprocess.Popen:
    env = dict(os.environ, HF_HUB_OFFLINE="1", PYTHONUNBUFFERED="1", **(extra_env or {}))
    cmd = [
        sys.executable, "-m", "streamlit", "run", str(ROOT / "app.py"),
        "--server.headless", "true", "--server.port", str(port), "--server.address", "127.0.0.1",
        "--browser.gatherUsageStats", "false", "--server.fileWatcherType", "none",
    ]  # fmt: skip
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT)
    return wait_healthy(proc, port, log)


# Benign console noise from the closed network of the test machine, never from our app.
IGNORED_CONSOLE = ("net::ERR_", "Failed to load resource", "favicon")


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        return int(next(line for line in f if line.startswith("VmRSS:")).split()[1]) / 1024


class Tab:
    """A browser page plus the console errors and dialogs it produced."""

    def __init__(self, page, base: str):
        self.page, self.base = page, base
        self.console_errors: list[str] = []
        self.dialogs: list[str] = []
        page.on("console", lambda m: self.console_errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: self.console_errors.append(str(e)))
        page.on("dialog", lambda d: (self.dialogs.append(d.message), d.dismiss()))

    def open(self, path: str = "", charts: int = 1, timeout: float = 90_000):
        self.page.goto(f"{self.base}/{path.lstrip('/')}", wait_until="domcontentloaded")
        return self.idle(charts, timeout)

    def switch(self, path: str, charts: int = 1, timeout: float = 90_000):
        """Open `path` through the sidebar's navigation, as a person does: the same session (its text, model and
        token limit), without reloading the app's scripts (a fresh load costs Chromium about a second of CPU before
        the page draws anything). Waits for another title, the app idle and the address on the page."""
        before = self.page.inner_text("[data-testid='stMain'] h1")
        self.page.evaluate(NAV_JS, path)
        self.page.wait_for_function(ARRIVED_JS, arg=[path, before], timeout=timeout, polling=POLL_MS)
        # arrived (the new page's title, its run over): no pause for a run to start
        return self.idle(charts, timeout, until=lambda: self.page.evaluate(ARRIVED_JS, [path, before]), pause_ms=0)

    def idle(self, charts: int = 1, timeout: float = 90_000, until=None, pause_ms: int = 300):
        """Wait until the script has finished and at least `charts` Plotly charts are drawn.

        After a click or a key press, pass `until` (a callable reading the page, true once the action has taken
        effect): on a busy host the rerun may not have started after the first 300 ms (`pause_ms`), and an idle app
        then only means the old view is still on screen."""
        self.page.wait_for_timeout(pause_ms)  # let a rerun start before we wait for it to end
        self.page.wait_for_selector("[data-testid='stMain'] h1", timeout=timeout)  # every page has a title
        self.page.wait_for_selector(IDLE, timeout=timeout)
        if until is not None:
            self.wait_until(until, timeout)
        if charts:
            wait_drawn(self.page, charts, timeout)
        return self

    def wait_for_sentence(self, text: str, timeout: float = 90_000) -> None:
        """Wait until the sentence box holds `text`: after a link opens, the sidebar can be drawn (and the app idle,
        its first charts drawn) a moment before the run that fills it from the link (seen in a loaded suite); a link
        that lost or altered the text still fails here, after `timeout`."""
        box = self.page.locator("textarea").first
        self.wait_until(lambda: box.input_value() == text, timeout)

    def wait_until(self, check, timeout: float = 90_000) -> None:
        """Poll `check()` until it is true, letting each rerun finish in between; fail after `timeout` ms."""
        deadline = time.monotonic() + timeout / 1000
        while True:
            try:
                if check():
                    return
            except Exception:  # noqa: BLE001 - the page is between two runs: read it again
                pass
            if time.monotonic() > deadline:
                raise AssertionError(f"the page never reached the expected state (url {self.page.url})")
            self.page.wait_for_timeout(250)
            self.page.wait_for_selector(IDLE, timeout=timeout)

    def wait_for_content(self, timeout: float = 90_000):
        """Wait until the page shows a chart or a message (st.info / st.warning / st.error)."""
        self.page.wait_for_function(
            "document.querySelectorAll('.js-plotly-plot .main-svg, [data-testid=\"stAlert\"]').length > 0",
            timeout=timeout,
            polling=POLL_MS,
        )
        return self

    def hover(self, chart, fx: float, fy: float, tries: int = 4) -> str:
        """Move the mouse to (fx, fy), fractions of `chart`'s plot area, and return Plotly's hover text.

        The plot area is measured again on each try: a chart drawn or resized after the first measurement (another
        chart finishing above it, a scroll bar appearing) moves it, and a move to where the mouse already is fires no
        hover event, so each try comes in from outside the cell."""
        for _ in range(tries):
            chart.scroll_into_view_if_needed()
            box = chart.locator(".nsewdrag").first.bounding_box()
            if box is not None:
                x, y = box["x"] + box["width"] * fx, box["y"] + box["height"] * fy
                self.page.mouse.move(x - 40, y - 40)
                self.page.mouse.move(x, y, steps=8)
                hover = self.page.locator(".hoverlayer .hovertext")
                try:
                    hover.first.wait_for(state="visible", timeout=4_000)
                    return hover.first.text_content() or ""
                except Exception:  # noqa: BLE001 - Playwright's TimeoutError: measure again and retry
                    pass
            self.page.wait_for_timeout(500)
        raise AssertionError(f"no hover text after {tries} tries")

    def shot(self, name: str) -> Path:
        path = OUT / f"{name}.png"
        self.page.screenshot(path=str(path), full_page=True)
        return path

    def real_console_errors(self) -> list[str]:
        return [m for m in self.console_errors if not any(s in m for s in IGNORED_CONSOLE)]

    def sliders(self) -> dict[str, str]:
        """{label: value} of every slider on the page (Streamlit renders them as input[type=range])."""
        return self.page.evaluate(
            """() => Object.fromEntries(Array.from(
                document.querySelectorAll("[data-testid='stSlider'] input[type='range']"),
                e => [e.getAttribute('aria-label'), e.value]))"""
        )

    def errors_on_page(self) -> list[str]:
        """The text of every exception and every st.error on the page. Streamlit 1.67 draws st.error as an stAlert
        whose content is `stAlertContentError` (there is no `stError` element: with that selector alone an st.error
        message was never seen, checked with one put on the Words page)."""
        return self.page.locator("[data-testid='stException'], [data-testid='stAlertContentError']").all_inner_texts()


# --- the container's start script (scripts/serve.sh), run directly: Docker cannot run on our machines ----------

SERVE = ROOT / "scripts" / "serve.sh"


def wait_healthy(
    proc: subprocess.Popen, port: int, log: Path, timeout: float = 90, host: str = "127.0.0.1"
) -> subprocess.Popen:
    """Poll /_stcore/health on host:port until it says ok; fail with the server's log if the process dies or never
    answers."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited early (rc {proc.returncode}); see {log}:\n{log.read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(f"http://{host}:{port}/_stcore/health", timeout=2) as r:
                if r.read().decode().strip() == "ok":
                    return proc
        except OSError:
            time.sleep(0.3)
    proc.kill()
    raise RuntimeError(f"server did not become healthy in {timeout:.0f} s; see {log}")


def start_script(port: int, log: Path, extra_env: dict | None = None) -> subprocess.Popen:
    """Start the server exactly as the container does (its CMD is scripts/serve.sh), on 127.0.0.1:`port`.

    The script runs `python` from PATH, as in the image; this venv's interpreter is put first on PATH.
    ATTNVIZ_HOSTED is left to the script (hosted by default) unless `extra_env` sets it.
    The script execs streamlit, so the returned process is the server itself (its pid is the server's).
    """
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    env = dict(os.environ, PATH=path, PORT=str(port), ATTNVIZ_ADDRESS="127.0.0.1", HF_HUB_OFFLINE="1")
    env.pop("ATTNVIZ_HOSTED", None)  # the script's own default decides, as in the image, unless extra_env says
    env.update(extra_env or {})
    proc = subprocess.Popen([str(SERVE)], cwd=ROOT, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT)
    return wait_healthy(proc, port, log)


def stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def dockerfile_healthcheck() -> list[str]:
    """The Dockerfile's HEALTHCHECK command (exec form), to run it against a server started by the script."""
    import json

    text = (ROOT / "Dockerfile").read_text().replace("\\\n", " ")
    (line,) = [ln for ln in text.splitlines() if ln.startswith("HEALTHCHECK")]
    return json.loads(line[line.index(" CMD ") + 5 :])
