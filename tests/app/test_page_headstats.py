"""The Head statistics page in AppTest: the grid, the table and the opened head equal the analysis functions."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import array, figures, run_page, texts, z_arrays

import attnviz
from attnviz.analysis import heads as H

PAGE = "app_pages/headstats.py"
TEXT = "The cat sat on the mat, because it was tired."


def page(**state):
    at = run_page(PAGE, text=TEXT, **state)
    assert not at.exception, [e.value for e in at.exception]
    return at


@pytest.fixture(scope="module")
def expected(bundled):
    tr = attnviz.trace(bundled, TEXT)
    tok = bundled.tokenizer
    special = H.special_keys(tr, *H.special_tokens_of(tok))
    return tr, special


@pytest.fixture(scope="module")
def default():
    return page()


def test_grid_table_and_head_show_the_default_statistic(default, expected):
    tr, special = expected
    at = default
    assert [t.value for t in at.title] == ["Head statistics"]
    figs = figures(at)
    assert set(figs) == {"sink_maps", "stat_grid", "head_weights"}
    grid = figs["stat_grid"]["data"][0]
    assert grid["colorscale"] and grid["zmin"] == 0.0  # explicit colour scale and range
    want = H.head_stats(tr, special)["entropy"]
    np.testing.assert_allclose(array(grid["z"]), want, atol=1e-4)
    table = at.dataframe[0].value
    assert len(table) == 6 * 12 and {"entropy", "special", "induction_score"} <= set(table.columns)
    # the opened head is the one with the highest entropy, its weights straight from the trace
    layer, head = np.unravel_index(np.argmax(want), want.shape)
    assert at.selectbox(key="hs_pick").value == f"{layer}-{head}"  # the id a link carries
    np.testing.assert_allclose(z_arrays(figs["head_weights"])[0], tr.layer(layer).weights[head], atol=1e-6)


def test_hiding_special_tokens_renormalises_and_says_so(expected):
    tr, special = expected
    at = page(hs_hide=True, hs_stat="special")
    assert any("renormalised" in c for c in texts(at, "caption"))
    figs = figures(at)
    np.testing.assert_allclose(array(figs["stat_grid"]["data"][0]["z"]), 0.0)
    shown = z_arrays(figs["head_weights"])[0]
    np.testing.assert_allclose(shown[:, special], 0.0)
    np.testing.assert_allclose(shown[~special].sum(-1), 1.0, atol=1e-5)


def test_induction_score_comes_from_a_repeated_random_sequence(bundled):
    at = page(hs_stat="induction_score")
    rep = attnviz.trace(bundled, H.repeated_random_text(bundled.tokenizer, n=20, seed=0))
    np.testing.assert_allclose(array(figures(at)["stat_grid"]["data"][0]["z"]), H.induction_scores(rep), atol=1e-4)
    assert any("repeated twice" in c for c in texts(at, "caption"))


def test_open_button_sets_layer_and_head_and_switches_to_heads():
    at = page(hs_stat="previous", hs_pick="2-5")
    at.button[0].click().run()
    assert not at.exception
    assert at.session_state["layer"] == 2 and at.session_state["head"] == 5
    assert [t.value for t in at.title] == ["Heads"]


def test_unk_counts_as_a_word_and_the_page_says_where_it_differs_from_clark(bundled):
    text = "I love 🍕 pizza!"
    at = run_page(PAGE, text=text, hs_stat="special")
    assert not at.exception, [e.value for e in at.exception]
    w = attnviz.trace(bundled, text).weights.astype(np.float64)  # tokens: [CLS] i love [UNK] pizza ! [SEP]
    want = (w[..., 0] + w[..., -1]).mean(-1)  # [CLS] and [SEP] columns only, averaged over every query
    np.testing.assert_allclose(array(figures(at)["stat_grid"]["data"][0]["z"]), want, atol=1e-5)
    assert any("[UNK]" in m and "theirs divide by n" in m for m in texts(at, "markdown"))
