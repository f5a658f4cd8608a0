"""The analysis pages at 1,280 x 800 in the light and the dark theme: no error or traceback on any page, no chart
title clipped or under the modebar, and a screenshot of each (test-output/screens/answers/<theme>-<page>.png) for a person to look at.

The dark theme is the browser's colour scheme, which the app follows (as in test_conditions.py)."""

from __future__ import annotations

from urllib.parse import quote

import pytest
from browserkit import CLIPPED_TITLES_JS, OUT, SERVER_LOG, UNDER_MODEBAR_JS, Tab

TEXT, PAIR = "The cat sat on the mat because it was tired.", "It slept all day."
PAIR_QUERY = f"?text={quote(TEXT)}&pair={quote(PAIR)}"
#: page -> (path, charts to wait for)
PAGES = {
    "scaling": ("scaling", 4),
    "masks": ("masks", 4),
    "headstats": ("headstats", 2),
    "rollout": ("rollout", 3),
    "neuron": ("neuron", 1),
    "scores": ("scores", 5),
    "words": ("words", 2),
    "pairs": ("pairs" + PAIR_QUERY, 3),
    "compare": ("compare", 1),
    "geometry": ("geometry?qk_colour=token", 2),
    "export": ("export", 0),
    "heads-pair": (PAIR_QUERY, 3),  # the Heads page with a second sentence: the boundary on its heatmaps
}


def shoot(tab: Tab, name: str) -> None:
    """<name>.png: the first screen (1,280 x 800); <name>-full.png: the whole page. Streamlit scrolls inside its
    main container, so a full-page screenshot alone shows one screen: the window is made as tall as the page. It is
    left tall: the next page is opened from a blank tab at 1,280 x 800 (fresh(), which spares Plotly a redraw of
    every chart of this page on the way back)."""
    tab.page.screenshot(path=str(OUT / "answers" / f"{name}.png"))
    height = tab.page.evaluate("() => document.querySelector(\"[data-testid='stMain']\").scrollHeight")
    tab.page.set_viewport_size({"width": 1280, "height": min(int(height) + 40, 8000)})
    tab.page.wait_for_timeout(1200)  # Plotly redraws after the resize
    tab.page.screenshot(path=str(OUT / "answers" / f"{name}-full.png"))


def fresh(tab: Tab) -> None:
    """Back to 1,280 x 800 on a blank tab, before the next page opens (each page is a fresh load anyway)."""
    if tab.page.viewport_size != {"width": 1280, "height": 800}:
        tab.page.goto("about:blank")
        tab.page.set_viewport_size({"width": 1280, "height": 800})


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_every_analysis_page_renders_cleanly_in_both_themes(browser, server, theme):
    context = browser.new_context(viewport={"width": 1280, "height": 800}, color_scheme=theme)
    (OUT / "answers").mkdir(parents=True, exist_ok=True)
    log = SERVER_LOG
    problems = []
    try:
        tab = Tab(context.new_page(), server)
        tab.page.set_default_timeout(120_000)
        for name, (path, charts) in PAGES.items():
            before = log.read_text()
            fresh(tab)
            tab.open(path, charts=charts, timeout=120_000)
            tab.page.wait_for_timeout(800)  # let Plotly finish laying out
            problems += [f"{name}: {e[:300]}" for e in tab.errors_on_page()]  # read at 1,280 x 800, as drawn
            problems += [f"{name}: {t}" for t in tab.page.evaluate(CLIPPED_TITLES_JS)]
            problems += [f"{name}: {t}" for t in tab.page.evaluate(UNDER_MODEBAR_JS)]
            main = tab.page.inner_text("[data-testid='stMain']")
            if "Traceback" in main:
                problems.append(f"{name}: a traceback on the page")
            shoot(tab, f"{theme}-{name}")
            new = log.read_text()[len(before) :]
            if "Traceback" in new or "Stack (most recent call last)" in new:
                problems.append(f"{name}: server log: {new[-1500:]}")
        problems += [f"console: {m[:300]}" for m in tab.real_console_errors()]
        background = tab.page.evaluate(
            """() => getComputedStyle(document.querySelector("[data-testid='stApp']")).backgroundColor"""
        )
        dark = sum(int(v) for v in background[background.index("(") + 1 : -1].split(",")[:3]) < 150
        assert dark == (theme == "dark"), f"the {theme} theme did not apply: background {background}"
    finally:
        context.close()
    assert problems == [], "\n".join(problems)
