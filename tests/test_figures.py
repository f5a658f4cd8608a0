"""attnviz.figures, the one composition of each page's figures: what the notebook's attnviz.show draws is what a
page lays out (tests/test_architecture.py checks that pages draw through it). Here: the numbers a page shows beside
its figures come with them and agree with the trace, and value-weighted views reach the figures."""

from __future__ import annotations

import numpy as np
import pytest

import attnviz
from attnviz import figures
from attnviz.ui import DEFAULT_TEXT


@pytest.fixture(scope="module")
def tr(bundled):
    return attnviz.trace(bundled, DEFAULT_TEXT)


def _z(fig) -> np.ndarray:
    return np.asarray(next(t for t in fig.data if t.type == "heatmap").z, np.float64)


@pytest.mark.parametrize("page, name", [("words", "tokens_head"), ("headstats", "head_weights")])
def test_value_weighted_views_draw_each_keys_share_of_what_the_head_writes(tr, page, name):
    shown = attnviz.show(tr, page, layer=2, head=5, view="value-weighted")
    fig = next(f for f in shown.figures if f.layout.meta["figure"] == name)
    assert fig.layout.meta["view"] == "value-weighted"
    z = _z(fig)
    for q in (0, 3, tr.n_tokens - 1):  # the Neuron view's weight x ||v W_O||, shared out over the keys
        taken = figures.neuron(tr, 2, 5, q).view.value_norms
        np.testing.assert_allclose(z[q], taken / taken.sum(), rtol=1e-4, atol=1e-6)
    plain = _z(figures.words(tr, 2, 5)["tokens_head"])
    assert np.abs(z - plain).max() > 1e-3  # not the weights again


def test_the_numbers_beside_a_pages_figures_come_with_them(bundled, tr):
    neuron = figures.neuron(tr, 1, 2, 4)
    np.testing.assert_allclose(neuron.table["weight"], tr.stages(1, heads=2).weights[0, 4], rtol=1e-6)
    assert neuron.values is not None and len(neuron.values) == 1 + tr.n_keys  # the output, then each key's v
    compared = figures.compare(tr, 1, 0, other_layer=3, measure="max_abs")
    top = compared.table[0]
    assert compared.result.change["max_abs"][top["head"]] == pytest.approx(
        np.abs(tr.stages(3).weights[top["head"]] - tr.stages(1).weights[top["head"]]).max(), rel=1e-5
    )
    assert [r["head"] for r in compared.table] == compared.result.ranked("max_abs")
    scaled = figures.scaling(tr, 1, 2, scale=1.0)
    assert scaled.compared is not None and scaled.names[-1] == "sqrt_d_law"
    hidden = figures.masks(attnviz.trace(bundled, DEFAULT_TEXT, hide=(2,)), 1, 2)
    assert hidden.report is None and hidden.names == ["mask_stages", "fill_demo"]  # no unmasked twin: no report


def test_pairs_give_the_table_the_bars_draw(bundled):
    paired = figures.pairs(attnviz.trace(bundled, DEFAULT_TEXT, pair="It slept."), 1, 2)
    crossing = next(t for t in paired["pair_crossing"].data if t.type == "bar")
    assert [row["crossing"] for row in paired.table] == pytest.approx(list(np.asarray(crossing.y, float)), abs=1e-6)
    assert len(paired.table) == bundled.n_head and paired.boundary > 0


def test_a_figure_is_found_by_its_name(tr):
    drawn = figures.rollout(tr, end=2)
    assert drawn.names == ["rollout", "raw_last"] and "flow" not in drawn
    with pytest.raises(KeyError, match="rollout, raw_last"):
        drawn["flow"]
    with_flow = figures.rollout(tr, end=2, query=3)
    assert with_flow.names[-1] == "flow" and len(attnviz.show(tr, "rollout", end=2, query=3)) == 3
