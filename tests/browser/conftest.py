"""Real-browser fixtures: one `streamlit run app.py` server per session, driven by Debian's chromium.

No skipping: if chromium is missing the tests fail with a message saying how to install it
(`.ci/run` installs it with apt).
"""

from __future__ import annotations

import shutil
import subprocess

import pytest
from browserkit import CHROMIUM_ARGS, OUT, SERVER_LOG, Tab, free_port, start_server, still


@pytest.fixture(scope="session")
def streamlit_server():
    """(url, process) of one real `streamlit run app.py` for the whole session (one per xdist worker, each with its
    own log, browserkit.SERVER_LOG)."""
    OUT.mkdir(parents=True, exist_ok=True)
    port = free_port()
    proc = start_server(port, SERVER_LOG)
    yield f"http://127.0.0.1:{port}", proc
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()


@pytest.fixture(scope="session")
def server(streamlit_server):
    return streamlit_server[0]


@pytest.fixture(scope="session")
def browser():
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.fail("Debian's chromium is required for browser tests: apt-get install -y chromium (.ci/run does this)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = still(p.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS))  # no animation drawn
        yield b
        b.close()


@pytest.fixture
def tab(browser, server):
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    page.set_default_timeout(90_000)
    t = Tab(page, server)
    yield t
    context.close()


@pytest.fixture(scope="session")
def light_pass(browser, server):
    """One pass through the pages at 1,280 x 800 in the light theme with the default text (page_pass.run), read by
    test_screenshots[light], test_small_screens[short] and the bundled model's part of test_long_pages' overlap check
    on a short text, which check the same pages at the same text, theme and size: each reads what it checks from the
    record and fails on its own. Under xdist the three are one unit (tests/conftest.py: BROWSER_SHARED)."""
    from page_pass import PHOTOGRAPHED, run

    return run(browser, server, "light", whole=PHOTOGRAPHED)
