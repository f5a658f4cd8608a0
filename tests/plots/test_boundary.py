"""Every [query, key] heatmap builder draws where sentence A ends when given the boundary, on every panel,
at the right position (between boundary - 1 and boundary), and nothing without it. Synthetic traces only."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import make_trace

from attnviz.plots import compare as cp
from attnviz.plots import headstats as hp
from attnviz.plots import heatmaps as hm
from attnviz.plots import masks as mp
from attnviz.plots import rollout as rp
from attnviz.plots.pairs import BOUNDARY_COLOUR

TOKENS = ["[CLS]", "the", "cat", "sat", "[SEP]", "it", "was", "tired", "[SEP]"]
B = 5  # sentence B starts at "it"


@pytest.fixture(scope="module")
def trace():
    return make_trace(TOKENS, n_layer=2, n_head=3)


def lines(fig) -> dict[str, tuple[set, set]]:
    """xref -> (x positions of vertical lines, y positions of horizontal lines) of the boundary colour."""
    out: dict[str, tuple[set, set]] = {}
    for s in fig.layout.shapes:
        if s.type != "line" or s.line.color != BOUNDARY_COLOUR:
            continue
        vertical, horizontal = out.setdefault(s.xref, (set(), set()))
        if s.x0 == s.x1:
            vertical.add(s.x0)
        if s.y0 == s.y1:
            horizontal.add(s.y0)
    return out


def builders(trace, boundary):
    w = trace.layer(0).weights
    mask = np.ones((len(TOKENS), len(TOKENS)), bool)
    return {
        "head_grid": (hm.head_grid(trace, 0, boundary=boundary), trace.n_head),
        "head_detail": (hm.head_detail(trace, 0, 1, boundary=boundary), 1),
        "weights_matrix": (hp.weights_matrix(w[0], TOKENS, "t", "m", boundary=boundary), 1),
        "diff_grid": (cp.diff_grid(w - w[::-1], TOKENS, "t", boundary=boundary), trace.n_head),
        "stage_pair": (mp.stage_pair(trace.layer(0).scaled[0], mask, TOKENS, "head 0", boundary), 2),
        "weights_comparison": (mp.weights_comparison(w[0], w[1], TOKENS, "head 0", boundary=boundary), 3),
    }


def test_every_heatmap_builder_marks_the_boundary_on_every_panel(trace):
    for name, (fig, panels) in builders(trace, B).items():
        found = lines(fig)
        assert len(found) == panels, (name, sorted(found))
        for xref, (vertical, horizontal) in found.items():
            assert vertical == horizontal == {B - 0.5}, (name, xref, vertical, horizontal)
        # each panel's lines live on that panel's own axes
        assert {s.yref for s in fig.layout.shapes} == {x.replace("x", "y") for x in found}, name


def test_without_a_boundary_no_line_is_drawn(trace):
    for name, (fig, _) in builders(trace, None).items():
        assert lines(fig) == {}, name


def test_a_window_that_misses_the_boundary_draws_nothing_and_one_that_holds_it_draws_it(trace):
    assert lines(hm.head_detail(trace, 0, 0, token_range=(6, 9), boundary=B)) == {}
    fig = hm.head_detail(trace, 0, 0, token_range=(3, 9), boundary=B)
    vertical, horizontal = lines(fig)["x"]
    assert vertical == horizontal == {B - 0.5}
    (upright,) = [s for s in fig.layout.shapes if s.x0 == s.x1]
    assert sorted([upright.y0, upright.y1]) == [2.5, 8.5]  # spans the window's queries 3..8 only


def test_diff_grid_of_a_window_draws_the_boundary_at_its_token_position(trace):
    w = trace.layer(0).weights[:, 3:, 3:]  # the page's window starting at token 3
    fig = cp.diff_grid(w, TOKENS, "t", boundary=B, window=((3, len(TOKENS)), (3, len(TOKENS))))
    assert {v for vertical, _ in lines(fig).values() for v in vertical} == {B - 0.5}  # drawn at positions 3..


def test_flow_bars_hold_both_series_at_token_positions_with_escaped_labels():
    tokens = ["<b>a</b>", "the", "the"]
    roll, flow = np.array([0.2, 0.5, 0.3]), np.array([0.4, 1.0, 0.7])
    fig = rp.flow_bars(tokens, roll, flow, query=1)
    bars = {t.name: t for t in fig.data}
    np.testing.assert_allclose(np.asarray(bars["rollout"].y, np.float64), roll, atol=1e-7)
    np.testing.assert_allclose(np.asarray(bars["flow"].y, np.float64), flow, atol=1e-7)
    assert list(bars["flow"].x) == [0, 1, 2]  # positions: the two "the" stay apart
    assert list(fig.layout.xaxis.ticktext) == ["00 &lt;b&gt;a&lt;/b&gt;", "01 the", "02 the"]
    assert fig.layout.meta["figure"] == "flow" and fig.layout.meta["query"] == 1
    assert "01 the" in fig.layout.title.text
