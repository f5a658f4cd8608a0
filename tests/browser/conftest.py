"""Real-browser fixtures: one `streamlit run app.py` server per session, driven by Debian's chromium.

No skipping: if chromium is missing the tests fail with a message saying how to install it
(`.ci/run` installs it with apt).
"""

from __future__ import annotations

import shutil
import subprocess

import pytest
from browserkit import OUT, SERVER_LOG, free_port, open_profile, start_server, still, tab_in


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
def profile(tmp_path_factory):
    """The test browser's own profile (browserkit.open_profile): most tabs open in it, with the app's scripts
    cached and compiled once per worker."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.fail("Debian's chromium is required for browser tests: apt-get install -y chromium (.ci/run does this)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        context = open_profile(p, chromium, tmp_path_factory.mktemp("chromium-profile"))
        yield context
        context.close()


@pytest.fixture(scope="session")
def browser(profile):
    """The same Chromium, for tests that need a fresh context (no cookies, no cache: a first visit), still as the
    profile (no animation drawn)."""
    return still(profile.browser)


@pytest.fixture
def tab(profile, server):
    t = tab_in(profile, server)
    yield t
    t.page.close()


@pytest.fixture(scope="session")
def light_pass(profile, server):
    """One pass through the pages at 1,280 x 800 in the light theme with the default text (page_pass.run), read by
    test_screenshots[light], test_small_screens[short] and the bundled model's part of test_long_pages' overlap check
    on a short text, which check the same pages at the same text, theme and size: each reads what it checks from the
    record and fails on its own. Under xdist the three are one unit (tests/conftest.py: BROWSER_SHARED)."""
    from page_pass import PHOTOGRAPHED, run

    return run(profile, server, "light", whole=PHOTOGRAPHED)
