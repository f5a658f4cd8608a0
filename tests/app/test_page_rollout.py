"""The Rollout page in AppTest: its matrices and flow bars equal the analysis functions on the same trace."""

from __future__ import annotations

import numpy as np
from helpers import array, figures, run_page, texts, z_arrays

import attnviz
from attnviz.analysis import rollout as R

PAGE = "app_pages/rollout.py"
TEXT = "The cat sat on the mat."


def page(**state):
    at = run_page(PAGE, text=TEXT, **state)
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_rollout_beside_the_last_layer_and_flow(bundled):
    tr = attnviz.trace(bundled, TEXT)
    at = page(ro_layers=(1, 4), ro_query=3)
    figs = figures(at)
    assert set(figs) == {"rollout", "raw_last", "flow"}
    np.testing.assert_allclose(z_arrays(figs["rollout"])[0], R.rollout(tr, 1, 4), atol=1e-6)
    np.testing.assert_allclose(z_arrays(figs["raw_last"])[0], tr.layer(4).weights.mean(0), atol=1e-6)
    bars = {t["name"]: array(t["y"]) for t in figs["flow"]["data"]}
    np.testing.assert_allclose(bars["flow"], R.flow(tr, 3, 1, 4), atol=1e-5)
    np.testing.assert_allclose(bars["rollout"], R.rollout(tr, 1, 4)[3], atol=1e-6)
    assert figs["rollout"]["data"][0]["zmin"] == 0.0 and figs["rollout"]["data"][0]["zmax"] == 1.0


def test_long_text_skips_flow_and_says_why():
    at = run_page(PAGE, text=" ".join(["word"] * 40))
    assert not at.exception
    assert "flow" not in figures(at)
    assert any("attention flow is computed for up to" in s for s in texts(at, "info"))
