"""attnviz.show's self-contained HTML (`Figures.to_html`, what `save` writes; plotly.js inside) for a trace's own view
and a Masks view, opened in Chromium from a file:// page: every chart drawn, hover works, no request leaves the page.
(In Jupyter the figures are outputs in plotly's mime type: tests/browser/test_jupyterlab.py.)"""

from __future__ import annotations

import numpy as np
from browserkit import DRAWN_JS, OUT, POLL_MS, Tab

import attnviz

DRAWN = DRAWN_JS


def test_a_trace_and_show_draw_offline_in_one_static_page(browser, bundled, tmp_path):
    trace = attnviz.trace(bundled, "The cat sat on the mat.")
    masked = attnviz.trace(bundled, "The cat sat on the mat.", causal=True)
    outputs = [attnviz.show(trace).to_html(), attnviz.show(masked, "masks", layer=1, head=2, unmasked=trace).to_html()]
    for html in outputs:  # nothing in an output points at a host
        assert "<script src" not in html and "<link" not in html and "https://cdn" not in html
    page_file = tmp_path / "notebook.html"
    page_file.write_text("<!DOCTYPE html><html><body>" + "\n".join(outputs) + "</body></html>", encoding="utf-8")

    context = browser.new_context(viewport={"width": 1280, "height": 800})
    requests = []
    context.route("**/*", lambda route: (requests.append(route.request.url), route.continue_()))
    tab = Tab(context.new_page(), "file://")
    tab.page.goto(page_file.as_uri())
    tab.page.wait_for_function(f"{DRAWN} >= 7", timeout=60_000, polling=POLL_MS)  # 3 heads figures + 4 masks figures
    assert tab.page.evaluate("document.querySelectorAll('.js-plotly-plot').length") == 7
    assert requests == [page_file.as_uri()], requests  # the page itself and nothing else
    assert tab.real_console_errors() == [] and tab.console_errors == []

    # the head drawn up close is the trace's own head 0 of layer 0, cell for cell
    z = tab.page.evaluate(
        "Array.from(document.querySelectorAll('.js-plotly-plot')[1]._fullData[0].z, r => Array.from(r))"
    )
    np.testing.assert_allclose(np.array(z), trace.layer(0).weights[0], atol=1e-6)
    detail = tab.page.locator(".js-plotly-plot").nth(1)
    text = tab.hover(detail, 2.5 / 9, 1.5 / 9)  # query 1 ("the"), key 2 ("cat")
    assert "the" in text and "cat" in text and "weights" in text, text
    OUT.mkdir(parents=True, exist_ok=True)
    tab.page.screenshot(path=str(OUT / "notebook_views.png"), full_page=True)
    context.close()
