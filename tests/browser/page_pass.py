"""One pass through the pages at 1,280 x 800 with the default text, read as drawn: what each check of the pages needs,
recorded once (test_screenshots, test_small_screens[short] and the bundled model's part of the overlap check on a
short text in test_long_pages read it; tests/browser/conftest.py's `light_pass` is the light theme's, shared by all
three).

One tab goes through the pages as a person does, through the sidebar in one session (a fresh load of each page
would reload the app's scripts: ~1 s of Chromium's CPU per page, none of it checked here); a page whose view needs
its own link is opened from it. Each page is read at 1,280 x 800 as first drawn (errors, clipped titles, titles
under the modebar, where its first chart starts, the server log it added), then photographed: the first screen, and
the whole page in a window made as tall as the page (Streamlit scrolls inside its main container, so a full-page
screenshot alone shows one screen), then 1,280 x 800 again for the next page.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import parse_qs, quote, urlparse

from browserkit import CLIPPED_TITLES_JS, OUT, SERVER_LOG, TEXT_OVERLAPS_JS, UNDER_MODEBAR_JS, Tab, tab_in

TEXT, PAIR = "The cat sat on the mat because it was tired.", "It slept all day."  # TEXT: the app's default
PAIR_QUERY = f"?text={quote(TEXT)}&pair={quote(PAIR)}"
#: page -> (path, charts to wait for, opened from its link). In this order: geometry's colour comes with its link;
#: Sentence pairs' second sentence with its link, after which the session holds the pair, which the Heads page shows.
PAGES = {
    "geometry": ("geometry?qk_colour=token", 2, True),
    "scaling": ("scaling", 4, False),
    "masks": ("masks", 4, False),
    "headstats": ("headstats", 2, False),
    "rollout": ("rollout", 3, False),
    "neuron": ("neuron", 1, False),
    "scores": ("scores", 2, False),  # its first tab: the sentence
    "scores-vectors": ("scores?sc_tab=Random+vectors", 3, True),  # its second tab, opened by its link
    "words": ("words", 2, False),
    "compare": ("compare", 1, False),
    "ablation": ("ablation", 0, False),  # says why not on BERT
    "export": ("export", 0, False),
    "heads": ("", 3, False),  # without a second sentence
    "module": ("module", 2, False),
    "pairs": ("pairs" + PAIR_QUERY, 3, True),
    "heads-pair": ("", 3, False),  # the Heads page with a second sentence: the boundary on its heatmaps
}

#: the pages test_screenshots photographs, whole too, in both themes
PHOTOGRAPHED = ("scaling", "masks", "headstats", "rollout", "neuron", "scores", "scores-vectors", "words", "pairs",
                "compare", "geometry", "export", "heads-pair")  # fmt: skip


@dataclass
class Seen:
    """One page as drawn at 1,280 x 800."""

    errors: list[str]  # error and exception elements' text
    clipped: list[str]  # chart titles clipped by their card
    under_modebar: list[str]  # titles, legend entries and notes under Plotly's toolbar
    traceback: bool  # "Traceback" on the page
    overlaps: list[str]  # chart text drawn over other text of its chart
    server_log: str  # what the server logged while the page was opened and read
    first_chart_top: float | None  # px from the window's top to the first chart's, None without a chart
    query: dict[str, list[str]]  # the address bar's parameters once drawn
    shot: str  # test-output/screens/answers/<shot>.png: its first screen (<shot>-full.png: the whole page, if taken)
    regrown: list[str] = field(default_factory=list)  # charts whose margins Plotly grew: laid out twice


@dataclass
class Pass:
    theme: str
    pages: dict[str, Seen] = field(default_factory=dict)
    console_errors: list[str] = field(default_factory=list)
    background: str = ""  # the app's background colour, as drawn


#: Resolves once the title's and every chart's box are where they were two animation frames before (at most ~100
#: pairs of frames): a window made taller lays the page out again at once, and a chart keeps its width, so Plotly does
#: not draw it again (no plotly_afterplot in the 2 s after; a screenshot then equals one taken 1.2 s later).
SETTLED_JS = """async () => {
  const boxes = () => JSON.stringify(Array.from(document.querySelectorAll("[data-testid='stMain'] h1, .js-plotly-plot"),
    e => { const r = e.getBoundingClientRect(); return [r.x, r.y, r.width, r.height]; }));
  const frame = () => new Promise(done => requestAnimationFrame(() => done()));
  let last = boxes();
  for (let i = 0; i < 100; i++) {
    await frame(); await frame();
    const now = boxes();
    if (now === last) return i;
    last = now;
  }
  return -1;
}"""
FIRST_CHART_TOP_JS = "() => document.querySelector('.js-plotly-plot')?.getBoundingClientRect().top ?? null"
#: Charts whose margins Plotly grew past the ones the figure gives (for a colour bar or tick labels): each such chart
#: is laid out twice on every draw (plots.margins.room). "name side asked->drawn" per grown side.
REGROWN_JS = """() => Array.from(document.querySelectorAll('.js-plotly-plot')).flatMap(gd => {
  const L = gd._fullLayout, name = (gd.layout.meta || {}).figure || 'chart';
  return ['l', 'r', 't', 'b'].filter(k => Math.round(L._size[k]) > L.margin[k])
    .map(k => `${name} ${k} ${L.margin[k]}->${Math.round(L._size[k])}`);
})"""


def run(profile, server: str, theme: str, pages=tuple(PAGES), whole=tuple(PAGES)) -> Pass:
    """Open `pages` (names of PAGES, in its order) in one tab of the test browser's profile in `theme` and record
    what each check reads; the pages in `whole` are photographed whole too."""
    (OUT / "answers").mkdir(parents=True, exist_ok=True)
    seen = Pass(theme)
    tab = tab_in(profile, server, 1280, 800, timeout=120_000)
    tab.page.emulate_media(color_scheme=theme)  # the system's theme, which the app follows
    try:
        for name in (n for n in PAGES if n in pages):
            path, charts, linked = PAGES[name]
            before = SERVER_LOG.read_text()
            if linked:
                tab.open(path, charts=charts, timeout=120_000)
            else:
                tab.switch(path, charts=charts, timeout=120_000)
            tab.page.wait_for_timeout(800)  # let Plotly finish laying out
            errors, clipped = tab.errors_on_page(), tab.page.evaluate(CLIPPED_TITLES_JS)  # read as drawn
            under_modebar, overlaps = tab.page.evaluate(UNDER_MODEBAR_JS), tab.page.evaluate(TEXT_OVERLAPS_JS)
            body, query = tab.page.inner_text("body"), parse_qs(urlparse(tab.page.url).query)
            top, regrown = tab.page.evaluate(FIRST_CHART_TOP_JS), tab.page.evaluate(REGROWN_JS)
            shot = shoot(tab, f"{theme}-{name}", whole=name in whole)
            log = SERVER_LOG.read_text()[len(before) :]
            traceback = "Traceback" in body
            seen.pages[name] = Seen(errors, clipped, under_modebar, traceback, overlaps, log, top, query, shot, regrown)
        seen.console_errors = tab.real_console_errors()
        seen.background = tab.page.evaluate(
            """() => getComputedStyle(document.querySelector("[data-testid='stApp']")).backgroundColor"""
        )
    finally:
        tab.page.close()
    return seen


def shoot(tab: Tab, name: str, whole: bool) -> str:
    """answers/<name>.png: the first screen (1,280 x 800); answers/<name>-full.png: the whole page if `whole`."""
    tab.page.screenshot(path=str(OUT / "answers" / f"{name}.png"))
    if not whole:
        return name
    height = tab.page.evaluate("() => document.querySelector(\"[data-testid='stMain']\").scrollHeight")
    tab.page.set_viewport_size({"width": 1280, "height": min(int(height) + 40, 8000)})
    tab.page.evaluate(SETTLED_JS)  # the page laid out for the new window (Plotly draws nothing again: same width)
    tab.page.screenshot(path=str(OUT / "answers" / f"{name}-full.png"))
    tab.page.set_viewport_size({"width": 1280, "height": 800})
    return name
