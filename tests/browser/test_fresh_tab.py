"""A new tab (a fresh browser context: nothing cached, nothing started) loads Plotly's script as the run starts, not
once the first chart has arrived (attnviz/ui/charts.py, start_plotly), and still draws every chart without an error."""

from __future__ import annotations

# When each thing first happened, in ms of the page's clock: the first chart element Streamlit put on the page, and
# the first time the app showed a run in progress. Installed before the page's own scripts run.
MARKS_JS = """(() => {
  const t = window.__marks = {};
  new MutationObserver(() => {
    const now = performance.now();
    if (t.chart === undefined && document.querySelector("[data-testid='stPlotlyChart']")) t.chart = now;
    const app = document.querySelector("[data-testid='stApp']");
    if (t.running === undefined && app && app.getAttribute('data-test-script-state') === 'running') t.running = now;
  }).observe(document, {subtree: true, childList: true, attributes: true});
})()"""
PLOTLY_REQUESTS_JS = """() => performance.getEntriesByType('resource')
  .filter(e => /\\/static\\/js\\/PlotlyChart\\.[\\w-]+\\.js$/.test(e.name)).map(e => e.startTime)"""


def test_a_page_without_a_chart_loads_plotly_for_the_next_one(tab):
    tab.page.add_init_script(MARKS_JS)
    tab.open("export", charts=0)
    tab.page.wait_for_function("() => window.__attnvizPlotly !== undefined")
    assert tab.page.evaluate("() => window.__attnvizPlotly.then(m => m !== null)"), "the import failed"
    (started,) = tab.page.evaluate(PLOTLY_REQUESTS_JS)  # asked for once, though no chart ever came
    assert tab.page.evaluate("() => window.__marks.chart") is None
    assert tab.errors_on_page() == [] and tab.real_console_errors() == [], tab.console_errors
    # then a page with charts, in the same tab: Plotly is already there, and every chart is drawn
    tab.switch("", charts=3)
    assert tab.page.evaluate(PLOTLY_REQUESTS_JS) == [started], "loaded once, not again"
    assert tab.errors_on_page() == [] and tab.real_console_errors() == [], tab.console_errors


def test_a_link_in_a_new_tab_loads_plotly_once_as_its_run_starts_and_draws_every_chart(tab):
    tab.page.add_init_script(MARKS_JS)
    tab.open("?text=A+new+visitor+opens+a+link", charts=3)
    marks, requests = tab.page.evaluate("() => window.__marks"), tab.page.evaluate(PLOTLY_REQUESTS_JS)
    # one request: the early import and the chart's own are one module (two would load and start plotly.js twice)
    assert len(requests) == 1 and marks["running"] <= requests[0] < marks["chart"], (marks, requests)
    # the script's container takes no room in the sidebar (its wrapper would leave a row's gap)
    hidden = "() => getComputedStyle(document.querySelector('.st-key-plotly-start').parentElement).display"
    assert tab.page.evaluate(hidden) == "none"
    assert tab.errors_on_page() == [] and tab.real_console_errors() == [], tab.console_errors
    assert "Traceback" not in tab.page.inner_text("body")
