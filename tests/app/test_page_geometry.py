"""The Query-key space page in AppTest, its figures for a notebook, and the click that picks a token: the points drawn
are the analysis's projection of the trace's own head; a missing library is said on the page with its command."""

from __future__ import annotations

import sys

import numpy as np
from helpers import array, figures, run_page, texts

import attnviz
from attnviz import ui
from attnviz.analysis import geometry as GE
from attnviz.figures import page_figures

PAGE = "app_pages/geometry.py"
TEXT = "The cat sat on the mat because <b>it</b> was tired."


def _points(fig: dict) -> tuple[np.ndarray, np.ndarray]:
    """(xy of every point, customdata [is_key, position]) in drawing order."""
    drawn = [t for t in fig["data"] if "customdata" in t]  # not the legend's two marker kinds
    xy = [np.c_[array(t["x"]), array(t["y"])] for t in drawn]
    custom = [array(t["customdata"]).reshape(-1, 2) for t in drawn]
    return np.concatenate(xy), np.concatenate(custom)


def test_the_page_draws_the_heads_projection_with_escaped_hover_and_every_head(bundled):
    at = run_page(PAGE, text=TEXT, layer=2, head=4, qk_colour="token")
    assert not at.exception, [e.value for e in at.exception]
    tr = attnviz.trace(bundled, TEXT)
    geo = GE.head_geometry(tr, 2, 4)
    figs = figures(at)
    assert set(figs) == {"query_key_space", "query_key_heads"}
    xy, custom = _points(figs["query_key_space"])
    by_point = {(int(k), int(p)): row for (k, p), row in zip(custom, xy)}
    for row, is_key, pos in zip(geo.xy, geo.is_key, geo.position):
        assert np.allclose(by_point[(int(is_key), int(pos))], row, atol=1e-5)
    hover = " ".join(h for t in figs["query_key_space"]["data"] if "customdata" in t for h in t["hovertext"])
    assert "&lt;" in hover and "<" not in hover.replace("<b>", "").replace("</b>", "").replace("<br>", "")  # escaped
    assert len(figs["query_key_heads"]["data"]) == 2 * tr.n_head
    said = " ".join(texts(at, "caption"))
    assert f"{geo.before:.2f}" in said and f"{geo.after:.2f}" in said


def test_a_missing_projection_library_is_said_on_the_page_with_its_command(monkeypatch):
    monkeypatch.setitem(sys.modules, "umap", None)
    at = run_page(PAGE, text="The cat sat.", qk_method="umap")
    assert not at.exception, [e.value for e in at.exception]
    assert any("pip install umap-learn==" in s for s in texts(at, "info"))
    assert any(str(e.label).startswith("Provenance") for e in at.expander)


def test_a_click_names_a_point_inside_the_trace_and_nothing_else():
    event = {"selection": {"points": [{"customdata": [1, 3], "x": 0.1, "y": 0.2}]}}
    assert ui.selected_point(event, 5, 7) == (True, 3)
    assert ui.selected_point({"selection": {"points": [{"customdata": {"0": 0, "1": 4}}]}}, 5, 7) == (False, 4)
    for bad in ([2, 1], [0, 5], [1, 7], [0, -1], "x", None):
        assert ui.selected_point({"selection": {"points": [{"customdata": bad}]}}, 5, 7) is None


def test_show_draws_the_page_in_a_notebook_for_a_grouped_query_model(tiny_llama, tiny_text):
    tr = attnviz.trace(tiny_llama, tiny_text)
    out = attnviz.show(tr, page="geometry", layer=1, head=3, colour="role")
    assert [f.layout.meta["figure"] for f in out.figures] == ["query_key_space", "query_key_heads"]
    assert "r = " in out.titles[0] and len(page_figures(tr, "geometry", 1, 3, normalised=False)) == 2
