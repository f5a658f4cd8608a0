"""Clicks on charts in Chromium: a cell of the Heads page's one-head view picks its column's key for "Who reads this
token", and squares of the Ablation page's layer x head grid add and remove heads; the selectbox or multiselect and
the address bar follow, and the address reopens the same view in a fresh context (no cookies, only the URL)."""

from __future__ import annotations

from urllib.parse import parse_qs, quote, urlparse

import pytest
from browserkit import IDLE, Tab, tab_in

# Pixel position of a marker of a chart's click targets, from Plotly's own axes (the chart found by its meta name).
MARKER_JS = """([figure, trace, x, y]) => {
  const gd = [...document.querySelectorAll('.js-plotly-plot')].find(g => g.layout.meta?.figure === figure);
  const t = gd._fullData.find(t => t.name === trace);
  const xa = gd._fullLayout[t.xaxis === 'x' ? 'xaxis' : 'xaxis' + t.xaxis.slice(1)];
  const ya = gd._fullLayout[t.yaxis === 'y' ? 'yaxis' : 'yaxis' + t.yaxis.slice(1)];
  const box = gd.getBoundingClientRect();
  return [box.left + xa._offset + xa.l2p(x), box.top + ya._offset + ya.l2p(y)];
}"""


def new_tab(browser, base: str) -> Tab:
    ctx = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = ctx.new_page()
    page.set_default_timeout(90_000)
    return Tab(page, base)


def click_marker(tab: Tab, figure: str, trace: str, x: int, y: int) -> None:
    """Click the marker at (x, y) of the trace named `trace` of the chart whose meta names `figure`."""
    tab.page.evaluate(
        "f => [...document.querySelectorAll('.js-plotly-plot')].find(g => g.layout.meta?.figure === f)"
        ".scrollIntoView({block: 'center'})",
        figure,
    )
    tab.page.wait_for_timeout(300)
    x_px, y_px = tab.page.evaluate(MARKER_JS, [figure, trace, x, y])
    tab.page.mouse.move(x_px - 3, y_px - 3)  # come in from beside the cell, as a person's pointer does
    tab.page.mouse.click(x_px, y_px)


def query(tab: Tab) -> dict[str, list[str]]:
    return parse_qs(urlparse(tab.page.url).query)


def key_token(tab: Tab) -> str:
    return tab.page.locator("input[role='combobox'][aria-label='Key token']").input_value()


def test_clicking_a_cell_of_the_one_head_view_picks_its_key_for_who_reads_and_the_link_keeps_it(
    browser, profile, server
):
    a, b = tab_in(profile, server), new_tab(browser, server)  # b: a fresh browser
    try:
        a.open("?text=The+cat+sat+on+the+mat", charts=4)  # [CLS] the cat sat on the mat [SEP]
        assert key_token(a) == "00 [CLS]"
        click_marker(a, "head_detail", "cells", 3, 5)  # key 3 ("sat"), query 5: any cell of the column
        a.idle(charts=4, until=lambda: key_token(a) == "03 sat" and query(a).get("hd_key") == ["3"])
        who = a.page.evaluate(
            "() => [...document.querySelectorAll('.js-plotly-plot')].find(g => g.layout.meta?.figure === 'who_reads')"
            ".layout.meta.key"
        )
        assert who == 3
        heading = a.page.locator("#who-reads").bounding_box()  # the page scrolled to the section the click changed
        assert heading is not None and 0 <= heading["y"] < a.page.viewport_size["height"], heading
        a.shot("click-key")
        box = a.page.locator("input[role='combobox'][aria-label='Key token']")  # the selectbox moves it on...
        box.click()
        box.fill("05 the")
        a.page.get_by_role("option", name="05 the").first.click()
        a.idle(charts=4, until=lambda: key_token(a) == "05 the" and query(a).get("hd_key") == ["5"])
        click_marker(a, "head_detail", "cells", 3, 5)  # ...and the same cell, clicked again, picks its key again
        a.idle(charts=4, until=lambda: key_token(a) == "03 sat" and query(a).get("hd_key") == ["3"])
        click_marker(a, "head_detail", "cells", 6, 1)
        a.idle(charts=4, until=lambda: key_token(a) == "06 mat" and query(a).get("hd_key") == ["6"])
        b.page.goto(a.page.url, wait_until="domcontentloaded")
        b.idle(charts=4, until=lambda: key_token(b) == "06 mat")
        assert a.errors_on_page() == [] and b.errors_on_page() == [] and a.real_console_errors() == []
    finally:
        a.page.close()
        b.page.context.close()


def heads_chosen(tab: Tab) -> list[str]:
    tags = tab.page.locator("[data-testid='stMultiSelect'] .react-aria-ComboBox span[data-tag]")
    return [t.get_attribute("aria-label") for t in tags.all()]


@pytest.fixture(scope="module")
def gpt2_link(gpt2_bpe_dir) -> str:
    """The Ablation page on the tiny byte-level BPE GPT-2 (2 layers x 4 heads, saved with its language-model head)."""
    return f"ablation?text={quote('the cat sat on the mat because it was')}&source=hub&model={quote(str(gpt2_bpe_dir))}"


def test_clicking_squares_of_the_ablation_grid_adds_and_removes_heads_and_the_link_keeps_them(
    browser, profile, server, gpt2_link
):
    a, b = tab_in(profile, server), new_tab(browser, server)  # b: a fresh browser
    try:
        a.open(gpt2_link, charts=3)  # the head grid, the prediction, the later heads' change
        assert heads_chosen(a) == ["L0 H1"]
        steps = [((2, 1), ["L0 H1", "L1 H2"]), ((3, 0), ["L0 H1", "L1 H2", "L0 H3"]),
                 ((2, 1), ["L0 H1", "L0 H3"]), ((2, 1), ["L0 H1", "L0 H3", "L1 H2"])]  # fmt: skip
        for (head, layer), want in steps:  # the third click puts L1 H2 back, the fourth removes it again
            click_marker(a, "ablation_picker", "heads", head, layer)
            ids = [w[1] + "-" + w[4:] for w in want]
            a.idle(charts=3, until=lambda w=want, i=ids: heads_chosen(a) == w and query(a).get("abl_heads") == i)
        picker = a.page.evaluate(
            "() => [...document.querySelectorAll('.js-plotly-plot')].find(g => g.layout.meta?.figure === "
            "'ablation_picker').layout.meta.removed"
        )
        assert picker == [[0, 1], [0, 3], [1, 2]]  # the grid fills the chosen squares
        a.page.wait_for_selector(IDLE)
        a.shot("click-heads")
        b.page.goto(a.page.url, wait_until="domcontentloaded")
        b.idle(charts=3, until=lambda: heads_chosen(b) == ["L0 H1", "L0 H3", "L1 H2"])
        assert a.errors_on_page() == [] and b.errors_on_page() == [] and a.real_console_errors() == []
    finally:
        a.page.close()
        b.page.context.close()
