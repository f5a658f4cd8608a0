"""The Heads page with models that add to attention: gpt-oss's sinks (each query's share that went to the sink,
checked against transformers' eager attention) and Gemma 2's softcapping (before against after, checked against
cap x tanh(before / cap)); where the scale was applied is said next to the stage picker."""

from __future__ import annotations

import numpy as np
import torch
from helpers import array, figures, run_page, texts

from tests.hf import families as fm

PAGE = "app_pages/heads.py"
TEXT = "the cat sat on the mat"


def heads(folder, **state):
    at = run_page(PAGE, source="hub", model=str(folder), text=TEXT, **state)
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_a_model_with_sinks_shows_each_query_share_of_the_sink(family_dir):
    folder = family_dir("gpt_oss")
    at = heads(folder, head=1, layer=1)
    figs = figures(at)
    assert "softcap_curve" not in figs
    bars = figs["sink_share"]
    from transformers import AutoTokenizer

    ids = AutoTokenizer.from_pretrained(folder)(TEXT)["input_ids"]
    assert len(ids) == len(bars["data"][0]["x"]) == 6
    with torch.no_grad():
        eager = fm.eager_model(folder)(
            input_ids=torch.tensor([ids]), output_attentions=True, use_cache=False
        ).attentions[1][0, 1]
    np.testing.assert_allclose(array(bars["data"][0]["y"]), 1 - eager.double().sum(-1).numpy(), rtol=0, atol=1e-5)
    assert any("Attention sink" in e.label for e in at.expander)
    assert any("sum to **less than 1**" in m for m in texts(at, "markdown"))
    assert any("went to the sink" in c for c in texts(at, "caption"))


def test_a_softcapping_model_shows_scores_before_and_after_the_cap(family_dir):
    at = heads(family_dir("gemma2"), head=2, stage="scaled")
    figs = figures(at)
    assert "sink_share" not in figs
    points = next(t for t in figs["softcap_curve"]["data"] if t["mode"] == "markers")
    before, after = array(points["x"]), array(points["y"])
    assert before.size == 21  # the causal cells of 6 tokens
    np.testing.assert_allclose(after, 5.0 * np.tanh(before / 5.0), rtol=0, atol=1e-6)
    assert any("Logit softcapping" in e.label for e in at.expander)
    assert any("5 × tanh(x / 5)" in m for m in texts(at, "markdown"))
    captions = texts(at, "caption")
    assert any("Where the scale is applied" in c and "multiplies each dot product" in c for c in captions)
