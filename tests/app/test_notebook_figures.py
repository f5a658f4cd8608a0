"""attnviz.show draws what the dashboard's pages draw: for the same trace and view, the figures a notebook gets
equal the figures the page sends to the browser (AppTest), trace for trace."""

from __future__ import annotations

import json

import numpy as np
import pytest
from helpers import array, figures, run_page

import attnviz
from attnviz.ui import DEFAULT_TEXT


def assert_same(a, b, where=""):
    """Equal figure data: every field exactly, numbers to float32 rounding (the Scaling page's slider holds
    the model's scale rounded to 8 decimals)."""
    if isinstance(a, dict) and "bdata" in a:
        np.testing.assert_allclose(array(a), array(b), rtol=1e-6, atol=1e-7, err_msg=where)
    elif isinstance(a, dict):
        assert a.keys() == b.keys(), where
        for k in a:
            assert_same(a[k], b[k], f"{where}.{k}")
    elif isinstance(a, list):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            assert_same(x, y, f"{where}[{i}]")
    elif isinstance(a, float):
        assert b == pytest.approx(a, rel=1e-6, abs=1e-9), where
    else:
        assert a == b, where


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
        assert_same(shown[name]["data"], on_page[name]["data"], name)


@pytest.mark.parametrize(
    "file, state, options, names",
    [
        ("headstats", dict(hs_pick="2-5"), dict(layer=2, head=5), {"head_weights"}),
        ("words", dict(layer=2, head=5), dict(layer=2, head=5), {"words_head", "tokens_head"}),
    ],
)
def test_show_draws_value_weighted_attention_as_the_pages_do(bundled, file, state, options, names):
    at = run_page(f"app_pages/{file}.py", view="value-weighted", **state)
    assert not at.exception, [e.value for e in at.exception]
    on_page = figures(at)
    shown = _by_name(attnviz.show(attnviz.trace(bundled, DEFAULT_TEXT), file, view="value-weighted", **options))
    for name in names:
        assert shown[name]["layout"]["meta"]["view"] == on_page[name]["layout"]["meta"]["view"] == "value-weighted"
        assert_same(shown[name]["data"], on_page[name]["data"], name)
