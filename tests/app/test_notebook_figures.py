"""attnviz.show draws what the dashboard's pages draw: for the same trace and view, the figures a notebook gets
equal the figures the page sends to the browser (AppTest), trace for trace."""

from __future__ import annotations

import json

import pytest
from helpers import figures, run_page

import attnviz
from attnviz.ui import DEFAULT_TEXT


def _by_name(shown) -> dict:
    out = {}
    for fig in shown.figures:
        spec = json.loads(fig.to_json())
        out[spec["layout"]["meta"]["figure"]] = spec
    return out


@pytest.mark.parametrize(
    "page, file, view, names",
    [
        ("heads", "heads", dict(layer=3, head=7), {"head_grid", "head_detail", "overview"}),
        (
            "scaling",
            "scaling",
            dict(layer=2, head=5),
            {"score_histograms", "softmax_pair", "row_saturation", "sqrt_d_law"},
        ),
        ("rollout", "rollout", dict(), {"rollout", "raw_last"}),
    ],
)
def test_show_gives_the_pages_own_figures(bundled, page, file, view, names):
    at = run_page(f"app_pages/{file}.py", **view)
    assert not at.exception, [e.value for e in at.exception]
    on_page = figures(at)
    shown = _by_name(attnviz.show(attnviz.trace(bundled, DEFAULT_TEXT), page, **view))
    assert names <= set(shown) and names <= set(on_page), (set(shown), set(on_page))
    for name in names:
        assert shown[name]["data"] == on_page[name]["data"], name
