"""The analysis pages at 1,280 x 800 in the light and the dark theme: no error or traceback on any page, no chart
title clipped or under the modebar, and a screenshot of each (test-output/screens/answers/<theme>-<page>.png) for a person to look at.

The dark theme is the browser's colour scheme, which the app follows (as in test_conditions.py). The pages are read
in one pass through them (page_pass.py: through the sidebar, a page whose view needs its own link from it); the
light theme's pass is shared with test_small_screens and test_long_pages (the same text, theme and size: the
`light_pass` fixture)."""

from __future__ import annotations

import pytest
from page_pass import PAIR, PHOTOGRAPHED, Pass, run


def problems_of(seen: Pass) -> list[str]:
    problems = []
    for name in PHOTOGRAPHED:
        page = seen.pages[name]
        problems += [f"{name}: {e[:300]}" for e in page.errors]
        problems += [f"{name}: {t}" for t in page.clipped]
        problems += [f"{name}: {t}" for t in page.under_modebar]
        if page.traceback:
            problems.append(f"{name}: a traceback on the page")
        if "Traceback" in page.server_log or "Stack (most recent call last)" in page.server_log:
            problems.append(f"{name}: server log: {page.server_log[-1500:]}")
        if page.query.get("pair") != ([PAIR] if name in ("pairs", "heads-pair") else None):  # the session's pair
            problems.append(f"{name}: pair={page.query.get('pair')} in the address")
    return problems + [f"console: {m[:300]}" for m in seen.console_errors]


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_every_analysis_page_renders_cleanly_in_both_themes(profile, server, theme, request):
    seen = request.getfixturevalue("light_pass") if theme == "light" else run(profile, server, theme, PHOTOGRAPHED)
    background = seen.background
    dark = sum(int(v) for v in background[background.index("(") + 1 : -1].split(",")[:3]) < 150
    assert dark == (theme == "dark"), f"the {theme} theme did not apply: background {background}"
    problems = problems_of(seen)
    assert problems == [], "\n".join(problems)


def test_every_chart_of_the_light_pass_is_laid_out_in_one_pass(light_pass):
    """Every chart of every page (redrawn from scratch whenever its figure changes) is given the room its colour bars,
    legend and tick labels take (plots.margins.room, tick_room), so Plotly lays each out once: a margin Plotly had to
    grow means a second layout pass on every redraw, about half of that chart's drawing time."""
    regrown = {name: seen.regrown for name, seen in light_pass.pages.items() if seen.regrown}
    assert regrown == {}, regrown
