"""#28: a cold start with the default view made ahead (attnviz.ui.made_ahead) shows that view's heatmaps while the model
still loads, then the live page in their place, in Chromium at 1,280 x 800."""

from __future__ import annotations

from browserkit import OUT, Tab, free_port, start_server, stop

from attnviz.hf import trace_pretrained
from attnviz.ui import DEFAULT_TEXT, made_ahead

MAIN = "[data-testid='stMain']"
# The made-ahead heatmaps drawn (their keyed containers), the notice beside them, and the run still going
PREVIEW_JS = """() => ['first-view-grid', 'first-view-head'].every(
    k => document.querySelector(`.st-key-${k} .js-plotly-plot .main-svg`))
  && document.querySelector("[data-testid='stMain']").innerText.includes('The model is still loading')"""
STATE_JS = "() => document.querySelector(\"[data-testid='stApp']\").getAttribute('data-test-script-state')"


def test_a_cold_start_shows_the_made_ahead_heatmaps_then_the_live_page(browser, bundled, tmp_path):
    made_ahead.save(trace_pretrained(bundled, DEFAULT_TEXT), DEFAULT_TEXT, tmp_path)  # as the image's build does
    OUT.mkdir(parents=True, exist_ok=True)
    port = free_port()
    proc = start_server(port, OUT.parent / "first-view-server.log", {"ATTNVIZ_CACHE_DIR": str(tmp_path)})
    try:
        context = browser.new_context(viewport={"width": 1280, "height": 800})
        tab = Tab(context.new_page(), f"http://127.0.0.1:{port}")
        tab.page.goto(tab.base + "/", wait_until="domcontentloaded")
        tab.page.wait_for_function(PREVIEW_JS, timeout=90_000, polling=100)
        assert tab.page.evaluate(STATE_JS) == "running"  # drawn while the run waits for the model
        assert tab.page.locator(f"{MAIN} h1").inner_text() == "Heads"
        tab.shot("first-view-cold")
        tab.idle(charts=3, timeout=120_000)  # the same run, once the model is loaded: the live page
        main = tab.page.inner_text(MAIN)
        assert "The model is still loading" not in main and "Who reads this token" in main, main[:300]
        assert tab.page.locator(".st-key-first-view-grid, .st-key-first-view-head").count() == 0
        assert tab.errors_on_page() == [] and tab.real_console_errors() == [], tab.console_errors
        context.close()
    finally:
        stop(proc)
