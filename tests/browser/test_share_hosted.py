"""The container's start script, run for real (Docker cannot run here): health, hosted mode, shared links.

One server for this module, started by scripts/serve.sh exactly as the image's CMD starts it (the script's
own defaults: hosted mode, 0.0.0.0 replaced by 127.0.0.1 only so that the test does not listen on every
interface). The shared-link test sets up a view through the UI in one browser context and opens the link from
"Share this view" in a fresh context: no cookies, no session, nothing in common but the URL.
"""

from __future__ import annotations

import os
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest
from browserkit import OUT, POLL_MS, Tab, dockerfile_healthcheck, free_port, start_script, stop

SENTENCE = "Links travel from one browser to another."


@pytest.fixture(scope="module")
def hosted():
    """(url, process) of scripts/serve.sh; the script execs streamlit, so the process is the server."""
    OUT.mkdir(parents=True, exist_ok=True)
    port = free_port()
    proc = start_script(
        port, OUT.parent / "serve-script.log", {"STREAMLIT_SERVER_COOKIE_SECRET": "shared-by-replicas-" + "0" * 32}
    )
    yield f"http://127.0.0.1:{port}", proc
    stop(proc)


def new_tab(browser, base: str) -> Tab:
    ctx = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = ctx.new_page()
    page.set_default_timeout(90_000)
    return Tab(page, base)


def heatmap_z(tab: Tab) -> list:
    """z of the first heatmap on the page, as Plotly.js holds it after drawing."""
    return tab.page.evaluate(
        """() => {
            const gd = Array.from(document.querySelectorAll('.js-plotly-plot'))
                .find(g => (g._fullData || []).some(d => d.type === 'heatmap'));
            const z = gd._fullData.find(d => d.type === 'heatmap').z;
            return Array.from(z, row => Array.from(row, v => (v === null || Number.isNaN(v)) ? null : v));
        }"""
    )


def view(tab: Tab) -> dict:
    """What a person sees: the page title, the sentence, the sliders, the first heatmap's numbers."""
    return {
        "title": tab.page.locator("[data-testid='stMain'] h1").inner_text(),
        "path": tab.page.url.split("?")[0].rsplit("/", 1)[1],
        "sentence": tab.page.locator("textarea[aria-label='Sentence']").input_value(),
        "sliders": tab.sliders(),
        "z": heatmap_z(tab),
    }


def test_the_start_script_serves_health_in_hosted_mode_and_stops_on_sigterm(hosted, browser):
    base, proc = hosted
    port = base.rsplit(":", 1)[1]
    with urllib.request.urlopen(f"{base}/_stcore/health", timeout=5) as r:
        assert r.read().decode().strip() == "ok"
    # the image's own HEALTHCHECK command, run as the engine would run it
    env = dict(os.environ, PORT=port)
    hc = subprocess.run(dockerfile_healthcheck(), env=env, capture_output=True, timeout=30, check=False)
    assert hc.returncode == 0, hc.stderr.decode()[-1000:]
    cmd = Path(f"/proc/{proc.pid}/cmdline").read_text().split("\0")
    # streamlit run, through the script that warms the imports and the model before the first visitor
    assert cmd[1:4] == ["scripts/serve.py", "run", "app.py"] and cmd[cmd.index("--server.port") + 1] == port, cmd
    environ = dict(e.split("=", 1) for e in Path(f"/proc/{proc.pid}/environ").read_text().split("\0") if "=" in e)
    assert environ["ATTNVIZ_HOSTED"] == "1", "the script must turn hosted mode on by default"

    # hosted mode as a visitor meets it: a hub model outside the (empty) allow-list is refused
    tab = new_tab(browser, base)
    try:
        tab.open("", charts=3)
        tab.page.get_by_text("Hugging Face model", exact=True).click()
        box = tab.page.get_by_role("textbox", name="Model id or local folder")
        box.fill("gpt2")
        box.press("Enter")
        tab.idle(charts=3, until=lambda: "only loads" in tab.page.inner_text("[data-testid='stApp']"))
        body = tab.page.inner_text("[data-testid='stMain']") + tab.page.inner_text("[data-testid='stSidebar']")
        assert "This hosted dashboard only loads these models" in body and "'gpt2' is not one of them" in body, body
        assert all("only loads" in e for e in tab.errors_on_page()), tab.errors_on_page()
        tab.shot("hosted-refusal")
    finally:
        tab.page.context.close()

    # SIGTERM (what Kubernetes and `docker stop` send) reaches the server, which stops cleanly and fast
    port2 = free_port()
    other = start_script(port2, OUT.parent / "serve-script-sigterm.log")
    t0 = time.perf_counter()
    other.terminate()
    assert other.wait(15) == 0
    assert time.perf_counter() - t0 < 10


def test_a_shared_link_opens_the_same_sentence_layer_head_and_page_in_a_fresh_browser(hosted, browser):
    base, _ = hosted
    a = new_tab(browser, base)
    b = new_tab(browser, base)
    try:
        # set the view up the way a person does: type, pick a page, move the sliders
        a.open("", charts=3)
        box = a.page.locator("textarea[aria-label='Sentence']")
        box.fill(SENTENCE)
        box.press("Control+Enter")
        a.idle(charts=3, until=lambda: "text=" in a.page.url)
        a.page.get_by_role("link", name="Scaling").click()
        a.idle(charts=1, until=lambda: a.page.url.split("?")[0].endswith("/scaling"))
        for name, steps in (("Layer", 4), ("Head", 7)):
            slider = a.page.get_by_role("slider", name=name)
            slider.focus()
            for _ in range(steps):
                slider.press("ArrowRight")
            a.page.wait_for_timeout(500)
            a.idle(charts=1)
        a.page.wait_for_function("() => location.search.includes('head=7')", polling=POLL_MS)
        a.idle(charts=1)
        sent = view(a)
        assert sent["sliders"]["Layer"] == "4" and sent["sliders"]["Head"] == "7", sent["sliders"]
        assert sent["sentence"] == SENTENCE and sent["path"] == "scaling"

        a.page.get_by_text("Share this view").click()
        code = a.page.locator("[data-testid='stPopoverBody'] code").first
        code.wait_for(state="visible")
        link = code.inner_text().strip()
        assert link.startswith(base + "/scaling?"), link

        # a fresh context: no cookie, no session state, only the link
        assert b.page.context.cookies() == []
        b.page.goto(link, wait_until="domcontentloaded")
        b.idle(charts=1)
        # on a busy host the first run can end before the sidebar's sliders are drawn: wait for them
        for name in ("Layer", "Head"):
            b.page.get_by_role("slider", name=name).wait_for(state="visible")
        b.idle(charts=1)
        got = view(b)
        b.shot("shared-link-received")
        for key in ("title", "path", "sentence", "sliders"):
            assert got[key] == sent[key], (key, got[key], sent[key])
        assert got["z"] == sent["z"], "the receiver's heatmap differs from the sender's"
        caption = b.page.get_by_text("Layer 4, head 7", exact=False)
        assert caption.count() >= 1, "the page does not say it shows layer 4, head 7"
        assert b.real_console_errors() == [] and b.errors_on_page() == []
    finally:
        a.page.context.close()
        b.page.context.close()
