"""The Ablation page in AppTest: a decoder's prediction change and later-head grid equal attnviz.ablate's numbers; the
bundled model (no language-model head) and our module say why they cannot, with no traceback."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import array, charts, figures, run_page, texts, z_arrays

import attnviz

PAGE = "app_pages/ablation.py"


def test_a_decoder_shows_the_prediction_before_and_after_and_the_later_heads(tiny_llama, tiny_llama_dir, tiny_text):
    at = run_page(PAGE, text=tiny_text, source="hub", model=str(tiny_llama_dir), abl_heads=["0-1", "0-3"],
                  abl_mode="mean", abl_target="dog")  # fmt: skip
    assert not at.exception, [e.value for e in at.exception]
    result = attnviz.ablate(tiny_llama, tiny_text, [(0, 1), (0, 3)], mode="mean", target="dog")
    figs = figures(at)
    bars = figs["ablation_prediction"]["data"]
    np.testing.assert_allclose(array(bars[0]["x"]), [t.before for t in result.top], atol=1e-6)
    np.testing.assert_allclose(array(bars[1]["x"]), [t.after for t in result.top], atol=1e-6)
    assert figs["ablation_prediction"]["layout"]["meta"]["heads"] == [[0, 1], [0, 3]]
    (grid,) = z_arrays(figs["ablation_change"])
    np.testing.assert_allclose(grid, result.attention_change(), atol=1e-6)
    assert grid[1].max() > 0 and not grid[0].any()
    metrics = {m.label: m.value for m in at.metric}
    assert float(metrics["logit change (after − before)"]) == pytest.approx(result.target_logit_change, rel=5e-3)
    assert any(m.startswith("Target dog") for m in metrics)


def test_the_bundled_model_and_our_module_say_why_not():
    at = run_page(PAGE, text="The cat sat on the mat.")
    assert not at.exception and not charts(at)
    assert any("cannot predict tokens" in t for t in texts(at, "info"))
    at = run_page(PAGE, text="The cat sat on the mat.", source="module")
    assert not at.exception and any("no language-model head" in t for t in texts(at, "info"))


def test_a_bad_target_is_a_message_and_the_page_stays_usable(tiny_llama_dir, tiny_text):
    at = run_page(PAGE, text=tiny_text, source="hub", model=str(tiny_llama_dir), abl_target="not a token at all")
    assert not at.exception and any("not one token" in t for t in texts(at, "warning"))
    at.session_state["abl_target"] = ""
    at.run()
    assert not at.exception and "ablation_prediction" in figures(at)


def test_an_emptied_head_list_is_in_the_link_and_reopens_empty(tiny_llama_dir, tiny_text):
    at = run_page(PAGE, text=tiny_text, source="hub", model=str(tiny_llama_dir))
    assert at.multiselect(key="abl_heads").value == ["0-1"]  # the default
    at.multiselect(key="abl_heads").set_value([]).run()
    assert not at.exception and at.query_params.get("abl_heads") in ("none", ["none"])
    link = run_page(PAGE, text=tiny_text, source="hub", model=str(tiny_llama_dir), abl_heads=["none"])
    assert not link.exception and link.multiselect(key="abl_heads").value == []
    assert any("at least one head" in t for t in texts(link, "info"))
