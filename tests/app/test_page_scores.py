"""The Score functions page in AppTest: its weights are the analysis module's, and the spread shows the law."""

from __future__ import annotations

import numpy as np
import torch
from helpers import array, figures, run_page, z_arrays

from attnviz.analysis import scores as S

PAGE = "app_pages/scores.py"


def test_weights_and_spread_follow_the_chosen_width():
    at = run_page(PAGE, sc_d=256, sc_seed=3)
    assert not at.exception, [e.value for e in at.exception]
    figs = figures(at)
    assert set(figs) == {"score_histograms", "score_weights", "score_spread"}
    g = torch.Generator().manual_seed(3)
    q, k = torch.randn(12, 256, generator=g), torch.randn(12, 256, generator=g)
    want = S.ScoreModule.seeded(256, seed=3).all(q, k)
    for z, name in zip(z_arrays(figs["score_weights"]), S.SCORE_FUNCTIONS):
        np.testing.assert_allclose(z, want[name][1].numpy(), atol=1e-6)
    assert {(t["zmin"], t["zmax"]) for t in figs["score_weights"]["data"]} == {(0.0, 1.0)}
    lines = {t["name"]: array(t["y"]) for t in figs["score_spread"]["data"]}
    assert lines["dot"][-1] > 10 * lines["dot"][0] and lines["additive"][-1] < 2 * lines["additive"][0]
