"""Issue 12, items 4-7 in a real browser: a laptop screen (1,280 x 800), ~400 tokens, a cold start, local paths,
the Back button."""

from __future__ import annotations

import subprocess
from urllib.parse import parse_qs, quote, urlparse

import pytest
from browserkit import CLIPPED_TITLES_JS, OUT, POLL_MS, Tab, free_port, start_server, tab_in
from page_pass import FIRST_CHART_TOP_JS

LONG = " ".join(["The cat sat on the mat because it was tired, and the dog watched it from the door."] * 20)
PAGES = {
    "heads": "", "scaling": "scaling", "masks": "masks", "module": "module", "headstats": "headstats",
    "rollout": "rollout", "neuron": "neuron", "scores": "scores",
}  # fmt: skip


@pytest.fixture
def laptop(profile, server):
    tab = tab_in(profile, server, 1280, 800, timeout=120_000)
    yield tab
    tab.page.close()


def chart(figure: str) -> str:
    """A JS expression for the chart whose layout.meta.figure is `figure`."""
    return f"Array.from(document.querySelectorAll('.js-plotly-plot')).find(g => g.layout.meta?.figure === '{figure}')"


def sentence_box_overlay(tab: Tab) -> str:
    """What the sentence box draws over its text (Streamlit's character counter, 'InputInstructions'), if anything."""
    box = tab.page.locator("[data-testid='stTextArea']").filter(has=tab.page.locator("textarea[aria-label='Sentence']"))
    overlay = box.locator("[data-testid='InputInstructions']")
    return overlay.inner_text() if overlay.count() else ""


@pytest.fixture(scope="module")
def long_pass(profile, server) -> dict[str, dict]:
    """The pages at 1,280 x 800 with the ~400-token text, as a person goes (the Heads page from its link, the others
    through the sidebar), each read as drawn: {page: {top, clipped, errors, text, overlay}}, where `text` is the
    address's text and `overlay` what the sentence box draws over its text. Read by the long case of the fold test
    and by the sentence box test (the same page, text and size)."""
    laptop, seen = tab_in(profile, server, 1280, 800, timeout=120_000), {}
    try:
        for i, (name, path) in enumerate(PAGES.items()):
            if i:  # the first page's text is the session's: the others through the sidebar
                laptop.switch(path, charts=1, timeout=120_000)
            else:
                laptop.open(path + "?text=" + quote(LONG), charts=2, timeout=120_000)
            laptop.page.wait_for_timeout(800)
            seen[name] = {
                "top": laptop.page.evaluate(FIRST_CHART_TOP_JS),
                "clipped": laptop.page.evaluate(CLIPPED_TITLES_JS),
                "errors": laptop.errors_on_page(),
                "text": parse_qs(urlparse(laptop.page.url).query).get("text"),
                "overlay": sentence_box_overlay(laptop),
            }
            laptop.shot(f"laptop-long-{name}")
    finally:
        laptop.page.close()
    return seen


@pytest.mark.parametrize("length", ["short", "long"])
def test_every_page_starts_a_chart_above_the_fold_with_its_titles_inside(request, length):
    """#12.5: at 1,280 x 800 the first chart starts in the first screen, and no chart title is clipped. The pages are
    read from a pass through them: with the short (default) text the light theme's (page_pass.py, shared with
    test_screenshots[light]: the same text, theme and size), with the long text this file's (long_pass)."""
    if length == "short":
        passed = request.getfixturevalue("light_pass").pages
        seen = {n: {"top": p.first_chart_top, "clipped": p.clipped, "errors": p.errors, "text": p.query.get("text")}
                for n, p in passed.items()}  # fmt: skip
    else:
        seen = request.getfixturevalue("long_pass")
    late = [f"{name}: first chart at {seen[name]['top']} px" for name in PAGES if not above(seen[name]["top"])]
    clipped = [t for name in PAGES for t in seen[name]["clipped"]]
    for name in PAGES:
        assert seen[name]["text"] == ([LONG] if length == "long" else None), name  # the session's text
        assert seen[name]["errors"] == [], name
    assert late == [] and clipped == [], "\n".join(late + clipped)


def above(top: float | None) -> bool:
    """At least 150 px of the chart is on the first screen (800 px high)."""
    return top is not None and top <= 650


# When the model-load notice went (the model loaded), in ms of the page's clock.
NOTICE_GONE_JS = """(() => {
  new MutationObserver(() => {
    const on = Array.from(document.querySelectorAll("[data-testid='stAlert']"))
      .some(a => a.innerText.includes('Loading the model'));
    if (on) window.__noticeSeen = true;
    else if (window.__noticeSeen && window.__noticeGone === undefined) window.__noticeGone = performance.now();
  }).observe(document, {subtree: true, childList: true, characterData: true});
})()"""
# [when our Plotly bundle was asked for (attnviz.ui.plotly_view)], [when Streamlit's own Plotly chunk was]
PLOTLY_REQUESTS_JS = """() => [/\\/component\\/[\\w.]+\\/plotly-attnviz\\.min\\.js$/, /\\/static\\/js\\/PlotlyChart\\./].map(
  name => performance.getEntriesByType('resource').filter(e => name.test(e.name)).map(e => e.startTime))"""


def test_a_cold_start_says_the_model_is_loading(browser, tmp_path):
    """#12.5: while the first model loads, the main area says so instead of staying blank; #28: and the browser
    loads Plotly's script meanwhile (app.py's fixed script, before the model loads), once, not after it has loaded.
    A start without the default view made ahead (an empty cache folder; tests/browser/test_first_view_in_chromium.py
    has the start with it)."""
    port = free_port()
    proc = start_server(port, OUT.parent / "cold-start-server.log", {"ATTNVIZ_CACHE_DIR": str(tmp_path)})
    try:
        context = browser.new_context(viewport={"width": 1280, "height": 800})
        page = context.new_page()
        page.add_init_script(NOTICE_GONE_JS)
        page.goto(f"http://127.0.0.1:{port}/", wait_until="domcontentloaded")
        page.wait_for_selector("[data-testid='stMain'] [data-testid='stAlert']", timeout=60_000)
        said = page.inner_text("[data-testid='stMain']").lower()  # the cold-start notice, or the model-load notice
        assert "loading" in said and "the model" in said, said
        page.screenshot(path=str(OUT / "cold-start.png"))
        tab = Tab(page, f"http://127.0.0.1:{port}").idle(charts=1, timeout=120_000)
        assert "Loading the model" not in tab.page.inner_text("[data-testid='stMain']")  # gone once loaded
        (requested, streamlits), loaded = page.evaluate(PLOTLY_REQUESTS_JS), page.evaluate("() => window.__noticeGone")
        assert len(requested) == 1 and requested[0] < loaded, (requested, loaded)  # asked for while the model loaded
        assert streamlits == []  # every chart is our component: Streamlit's 4.7 MB Plotly is never loaded
        assert tab.errors_on_page() == [] and tab.real_console_errors() == [], tab.console_errors
        context.close()
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()


def test_at_400_tokens_colour_ranges_show_structure_and_long_charts_are_grouped(laptop):
    """#12.6: a colour range that is not all dark, the true weight in the hover, no barcode or zig-zag."""
    laptop.open("?text=" + quote(LONG), charts=3)
    laptop.page.locator("[data-testid='stRadio'] label", has_text="per-row max").click()
    laptop.idle(charts=3, until=lambda: parse_qs(urlparse(laptop.page.url).query).get("colour") == ["row"])
    assert parse_qs(urlparse(laptop.page.url).query).get("colour") == ["row"], laptop.page.url
    bright, template = laptop.page.evaluate(
        f"""() => {{ const t = {chart("head_grid")}._fullData[0];
            const cells = Array.from(t.z, r => Array.from(r)).flat();
            return [cells.filter(v => v > 0.1).length / cells.length, t.hovertemplate]; }}"""
    )
    assert bright > 0.05, f"only {bright:.1%} of cells are brighter than the bottom tenth"
    assert "customdata" in template and "%{z" not in template, template
    # past 40 tokens the grid's hover still names the tokens: its axes are categories named '%03d token'
    x, y = laptop.page.evaluate(f"() => {{ const t = {chart('head_grid')}._fullData[0]; return [t.x[5], t.y[7]]; }}")
    assert x.startswith("005 ") and y.startswith("007 ") and len(x) > 4, (x, y)
    laptop.shot("long-heads-row-max")
    laptop.switch("scaling", charts=3)  # the session's text, through the sidebar
    n = laptop.page.evaluate(f"() => Math.max(...{chart('row_saturation')}._fullData.map(t => t.x.length))")
    assert n <= 64, f"the row chart draws {n} points"
    assert "in 64 groups" in laptop.page.inner_text("[data-testid='stMain']")
    laptop.switch("masks", charts=4)
    n = laptop.page.evaluate(f"() => {chart('fill_demo')}._fullData[0].z[0].length")
    assert n <= 64, f"the fill chart draws {n} columns"
    assert "total weight" in laptop.page.inner_text("[data-testid='stMain']")
    laptop.shot("long-masks")


LH = ("Layer", "Head")


def test_back_and_forward_move_between_views(laptop):
    """#12.4: two layer changes and a head change, then Back three times returns view by view (never about:blank),
    and Forward comes back; each view shows the layer and head its address names."""
    laptop.page.goto("about:blank")
    laptop.open("", charts=2)

    def pick(label: str, key: str) -> None:
        before = laptop.page.url
        slider = laptop.page.get_by_role("slider", name=label)
        slider.focus()
        slider.press("ArrowRight")
        laptop.page.wait_for_function(f"() => location.href !== {before!r}", timeout=30_000, polling=POLL_MS)
        laptop.idle(charts=2)

    def view() -> tuple[str, dict]:
        q = parse_qs(urlparse(laptop.page.url).query)
        return laptop.page.url, {"layer": q.get("layer", ["0"])[0], "head": q.get("head", ["0"])[0]}

    seen = [view()]
    pick("Layer", "layer")
    seen.append(view())
    pick("Layer", "layer")
    seen.append(view())
    pick("Head", "head")
    seen.append(view())
    assert [v["layer"] for _, v in seen] == ["0", "1", "2", "2"] and seen[-1][1]["head"] == "1", seen
    for url, want in reversed(seen[:-1]):
        laptop.page.go_back()
        shows = (want["layer"], want["head"])
        laptop.idle(
            charts=2, until=lambda u=url, s=shows: laptop.page.url == u and s == tuple(map(laptop.sliders().get, LH))
        )
        assert laptop.page.url == url, (laptop.page.url, url)
        shown = laptop.sliders()
        assert (shown.get("Layer"), shown.get("Head")) == (want["layer"], want["head"]), (shown, want)
        title = laptop.page.evaluate(f"() => {chart('head_grid')}.layout.meta.layer")
        assert str(title) == want["layer"], (title, want)
    laptop.page.go_forward()
    laptop.idle(charts=2, until=lambda: laptop.page.url == seen[1][0] and laptop.sliders().get("Layer") == "1")
    assert laptop.page.url == seen[1][0] and laptop.sliders().get("Layer") == "1"
    assert laptop.errors_on_page() == []


def test_the_sentence_box_shows_no_counter_over_a_long_text(long_pass):
    """#12.7: at ~400 tokens the sentence box has no character counter drawn over its last line of text (the Heads
    page of long_pass, opened from its link)."""
    shown = long_pass["heads"]["overlay"]
    assert shown.strip() == "", f"the sentence box draws {shown!r} over the text"
