"""The dashboard in a real Chromium against a real `streamlit run app.py` server."""

from __future__ import annotations

from urllib.parse import parse_qs, urlparse

import pytest
from browserkit import ARRIVED_JS, Tab, chart_js, wait_drawn

PAGES = {"heads": "", "scaling": "scaling", "masks": "masks", "module": "module?source=module"}


@pytest.mark.parametrize("name", list(PAGES))
def test_every_page_renders_charts_without_errors(tab, name):
    tab.open(PAGES[name])
    n_charts = tab.page.locator(".js-plotly-plot").count()
    tab.shot(f"page-{name}")
    assert n_charts >= 1, f"{name}: no chart drawn"
    assert tab.errors_on_page() == [], f"{name}: error element on the page"
    assert tab.real_console_errors() == [], f"{name}: browser console errors {tab.console_errors}"
    assert "Traceback" not in tab.page.inner_text("body")


def test_hovering_a_heatmap_cell_shows_the_token_pair(tab):
    tab.open("?text=The+cat+sat+on+the+mat", charts=2)  # the grid and the large single-head heatmap below it
    chart = tab.page.locator(".js-plotly-plot").nth(1)
    # the cell at query "cat" (row 2), key "sat" (column 3) of 8 tokens: [CLS] the cat sat on the mat [SEP]
    text = tab.hover(chart, 3.5 / 8, 2.5 / 8)
    tab.shot("hover")
    assert "cat" in text and "sat" in text, text


# Watches the tab's Plotly from the moment it is set: every Plotly.react call in window.plotlyTurns (the chart's
# figure name, when it started and settled, and whether a task ran between the end of the call before it and its
# start: a timer set at each call's end has fired by the next start) and the Plotly.Plots.resize calls in
# window.plotlyResizes.
WATCH_PLOTLY_JS = """(() => {
  const calls = window.plotlyTurns = [];
  window.plotlyResizes = 0;
  let plotly, tick = {fired: true};
  Object.defineProperty(window, 'Plotly', {configurable: true, get: () => plotly, set: (p) => {
    plotly = p;
    const react = p.react, resize = p.Plots.resize;
    p.Plots.resize = (...a) => { window.plotlyResizes++; return resize(...a); };
    p.react = async (gd, data, layout, config) => {
      const call = {figure: (layout.meta || {}).figure, start: performance.now(), ownTask: tick.fired};
      calls.push(call);
      const out = await react(gd, data, layout, config);
      call.end = performance.now();
      const mark = tick = {fired: false};
      setTimeout(() => { mark.fired = true; }, 0);
      return out;
    };
  }});
})()"""
PAGE_ORDER = ["head_grid", "head_detail", "who_reads", "overview"]  # the Heads page's charts, top to bottom


def test_a_new_layer_is_drawn_in_place_by_one_plotly_react(tab):
    # Streamlit's st.plotly_chart mounted a new chart for every changed figure and drew it twice; our component
    # (ui.plotly_view) keeps the element and hands the new figure to Plotly once, and Plotly draws it on the plot it
    # has: a new file name for the camera (it names the layer) once made Plotly.react start over with a new plot
    tab.page.add_init_script(WATCH_PLOTLY_JS)
    tab.open("?text=The+cat+sat+on+the+mat&layer=0", charts=4)
    tab.page.wait_for_timeout(500)
    # a first visit: each chart drawn by one Plotly.react, no resize redraw after it
    assert tab.page.evaluate("() => [window.plotlyTurns.length, window.plotlyResizes]") == [4, 0]
    grid = chart_js("head_grid")
    kept = f"() => {{ const gd = {grid}; return [gd.kept, gd.draws, gd.querySelector('.modebar').kept]; }}"
    tab.page.evaluate(
        f"() => {{ const gd = {grid}; gd.kept = true; gd.draws = 0; gd.on('plotly_afterplot', () => gd.draws++);"
        " gd.querySelector('.modebar').kept = true; }"  # Plotly.newPlot makes a new toolbar
    )
    tab.page.locator("[data-testid='stSidebar']").get_by_role("slider").first.press("ArrowRight")
    tab.idle(charts=2, until=lambda: tab.page.evaluate(f"() => {grid}?.layout.meta.layer === 1"))
    tab.page.wait_for_timeout(500)  # any later run or draw would have come by now
    assert tab.page.evaluate(kept) == [True, 1, True]
    assert tab.real_console_errors() == []
    # the camera still saves the layer on screen
    chart = tab.page.locator(".js-plotly-plot").first
    chart.hover()
    with tab.page.expect_download() as download:
        chart.locator(".modebar-btn[data-title*='Download']").click()
    assert "_layer1_" in download.value.suggested_filename, download.value.suggested_filename


def test_the_charts_of_a_run_are_drawn_one_at_a_time_in_page_order(tab):
    # ui.plotly_view draws a run's charts in turn, each in a task of its own, so the browser paints the top of the
    # page (the grid, the head up close) before it draws the charts below; before, all four were drawn in one task
    tab.page.add_init_script(WATCH_PLOTLY_JS)
    tab.open("?text=The+cat+sat+on+the+mat&layer=0", charts=4)
    drawn = "() => window.plotlyTurns.filter(c => c.end).length >= 4"
    tab.page.wait_for_function(drawn)
    # a first visit: every chart waited for Plotly's script, and the lowest asked first; the highest is drawn first
    assert [c["figure"] for c in tab.page.evaluate("() => window.plotlyTurns")] == PAGE_ORDER
    tab.page.evaluate("() => { window.plotlyTurns.length = 0; }")
    tab.page.locator("[data-testid='stSidebar']").get_by_role("slider").first.press("ArrowRight")
    tab.idle(charts=4, until=lambda: tab.page.evaluate(drawn))
    calls = tab.page.evaluate("() => window.plotlyTurns")
    assert [c["figure"] for c in calls] == PAGE_ORDER, calls
    for before, after in zip(calls, calls[1:]):
        assert after["start"] >= before["end"], calls  # one at a time
        assert after["ownTask"], calls  # the browser could paint between them


def test_url_with_query_parameters_opens_the_same_view(tab):
    tab.open("?text=Hello+world+again&layer=3&head=5")
    tab.wait_for_sentence("Hello world again")
    # a rerun's page between two runs can lack a sidebar slider for a moment (once in a loaded suite: Head and the
    # token limit there, Layer not); a page that never draws Layer still fails here, after the wait
    tab.wait_until(lambda: {"Layer", "Head"} <= set(tab.sliders()))
    sliders = tab.sliders()
    assert sliders.get("Layer") == "3" and sliders.get("Head") == "5", sliders
    assert "hello" in tab.page.inner_text("[data-testid='stMain']").lower()


def test_switching_pages_keeps_the_state(tab):
    tab.open("?text=Switching+pages+keeps+this&layer=2")
    title = tab.page.inner_text("[data-testid='stMain'] h1")
    tab.page.locator("[data-testid='stSidebarNav'] a", has_text="Masks").click()
    # arrived: the new page's title drawn and its run over (on a loaded host the path changes, and the old page
    # stays idle on screen, before the run that writes the address back starts)
    tab.idle(until=lambda: tab.page.evaluate(ARRIVED_JS, ["masks", title]))
    query = parse_qs(urlparse(tab.page.url).query)
    assert urlparse(tab.page.url).path.endswith("/masks")
    assert query.get("text") == ["Switching pages keeps this"], tab.page.url
    assert query.get("layer") == ["2"], tab.page.url
    assert tab.page.locator("textarea").first.input_value() == "Switching pages keeps this"
    tab.page.reload()
    box = tab.page.locator("textarea").first
    # a reloaded page's sidebar can be drawn (and the app idle) a moment before the run that fills it from the link:
    # wait for the text (up to idle's timeout: a link that lost it still fails here), as the other reads after a load
    tab.idle(until=lambda: box.input_value() == "Switching pages keeps this")
    assert box.input_value() == "Switching pages keeps this"


def test_typing_a_new_sentence_updates_the_heatmaps(tab):
    tab.open()
    area = tab.page.locator("textarea").first
    area.fill("Dogs bark loudly")
    area.press("Control+Enter")
    tab.idle(until=lambda: "bark" in tab.page.inner_text("[data-testid='stMain']"))
    assert "bark" in tab.page.inner_text("[data-testid='stMain']")
    assert "Dogs+bark+loudly" in tab.page.url or "Dogs%20bark%20loudly" in tab.page.url


def test_clicking_an_overview_tile_opens_that_layer_and_head(tab):
    tab.open("?text=The+cat+sat+on+the+mat", charts=4)  # grid, one head, who reads a token, the overview
    overview = tab.page.locator(".js-plotly-plot").nth(3)
    overview.scroll_into_view_if_needed()
    # the clickable markers sit at tile centres; Plotly.js knows their pixel positions
    x, y = tab.page.evaluate(
        """() => {
            const gd = [...document.querySelectorAll('.js-plotly-plot')].find(
                g => ((g.layout || {}).meta || {}).figure === 'overview');  // one head's cells are clickable too
            const i = gd._fullData.findIndex(t => t.type === 'scatter' && t.customdata);
            const t = gd._fullData[i];
            const k = t.customdata.findIndex(c => c[0] === 3 && c[1] === 7);
            const xa = gd._fullLayout[t.xaxis === 'x' ? 'xaxis' : 'xaxis' + t.xaxis.slice(1)];
            const ya = gd._fullLayout[t.yaxis === 'y' ? 'yaxis' : 'yaxis' + t.yaxis.slice(1)];
            const box = gd.getBoundingClientRect();
            return [box.left + xa._offset + xa.l2p(t.x[k]), box.top + ya._offset + ya.l2p(t.y[k])];
        }"""
    )
    tab.page.mouse.click(x, y)
    tab.idle(charts=4, until=lambda: tab.sliders().get("Head") == "7")
    assert tab.sliders().get("Layer") == "3" and tab.sliders().get("Head") == "7", tab.sliders()
    assert "layer=3" in tab.page.url and "head=7" in tab.page.url


def test_share_this_view_shows_a_link_that_reopens_the_same_view(tab, browser):
    tab.open("masks?text=Share+me+please&layer=2&fill=-inf")
    tab.page.get_by_text("Share this view").click()
    code = tab.page.locator("[data-testid='stPopoverBody'] code").first
    code.wait_for(state="visible")
    link = code.inner_text().strip()
    assert "/masks?" in link and "text=Share+me+please" in link and "fill=-inf" in link and "layer=2" in link, link
    other = browser.new_context(viewport={"width": 1400, "height": 1000})
    try:
        page = other.new_page()
        page.goto(link)
        page.wait_for_selector("[data-testid='stMain'] h1")
        wait_drawn(page)
        Tab(page, "").wait_for_sentence("Share me please", timeout=30_000)
        assert page.get_by_role("radio", name="-inf").is_checked()
    finally:
        other.close()
