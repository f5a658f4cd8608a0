"""The Score functions page in AppTest: our module with each score function on the sentence, and the random-vector
part; its weights are the module's own forward pass and the analysis module's, and the spread shows the law."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import torch
from helpers import array, figures, run_page, texts, z_arrays

import attnviz
from attnviz import ModuleSource
from attnviz.analysis import scores as S
from attnviz.attention import SCORE_FUNCTIONS
from attnviz.module.tracing import input_vectors

PAGE = "app_pages/scores.py"
TEXT = "The cat sat on the mat."


def forward_weights(src: ModuleSource, text: str, head: int) -> np.ndarray:
    """[query, key] weights of one head from the module's own forward pass (not the trace's records)."""
    x, _, _ = input_vectors(src, text)
    with torch.no_grad():
        _, stages = src.build()(x)
    return stages.weights[head].numpy()


def test_weights_and_spread_follow_the_chosen_width():
    at = run_page(PAGE, text=TEXT, sc_d=256, sc_seed=3, sc_tab="Random vectors")
    assert not at.exception, [e.value for e in at.exception]
    figs = figures(at)
    assert set(figs) == {"score_histograms", "score_weights", "score_spread"}  # the sentence's tab is not run
    assert [t.label for t in at.tabs] == ["Your sentence", "Random vectors"]
    g = torch.Generator().manual_seed(3)
    q, k = torch.randn(12, 256, generator=g), torch.randn(12, 256, generator=g)
    want = S.ScoreModule.seeded(256, seed=3).all(q, k)
    for z, name in zip(z_arrays(figs["score_weights"]), S.SCORE_FUNCTIONS):
        np.testing.assert_allclose(z, want[name][1].numpy(), atol=1e-6)
    assert {(t["zmin"], t["zmax"]) for t in figs["score_weights"]["data"]} == {(0.0, 1.0)}
    lines = {t["name"]: array(t["y"]) for t in figs["score_spread"]["data"]}
    assert lines["dot"][-1] > 10 * lines["dot"][0] and lines["additive"][-1] < 2 * lines["additive"][0]


def test_our_module_runs_each_score_function_on_the_sentence(bundled):
    state = dict(source="module", m_inputs="random", m_weights="random", m_dmodel=64, m_heads=4, m_seed=2, head=1)
    at = run_page(PAGE, text=TEXT, **state)
    assert not at.exception, [e.value for e in at.exception]
    figs = figures(at)
    assert set(figs) == {"module_softmax_inputs", "module_score_weights"}  # the first tab's; the other is not run
    panels = z_arrays(figs["module_score_weights"])
    assert len(panels) == len(SCORE_FUNCTIONS)
    for z, kind in zip(panels, SCORE_FUNCTIONS):
        src = ModuleSource(bundled, d_model=64, n_head=4, seed=2, inputs="random", weights="random", score=kind)
        np.testing.assert_allclose(z, forward_weights(src, TEXT, 1), atol=1e-6, err_msg=kind)
    # one colour scale for the four panels, topped by the largest weight drawn (not 1: long rows would be dark)
    assert {(t["zmin"], t["zmax"]) for t in figs["module_score_weights"]["data"]} == {
        (0.0, max(z.max() for z in panels))
    }
    # the histograms show what the softmax receives: dot's inputs are scaled dot's times sqrt(d_head) = 4
    spread = {r["score function"]: r["std of softmax input"] for r in at.dataframe[0].value.to_dict("records")}
    np.testing.assert_allclose(spread["dot"], 4 * spread["scaled dot"], rtol=1e-4)
    assert any("Why scaling matters here" in t for t in texts(at, "markdown"))
    assert [e.label for e in at.expander if e.label.startswith("Provenance")]


def test_with_a_pretrained_source_the_page_uses_the_module_preview():
    at = run_page(PAGE, text=TEXT)
    assert not at.exception, [e.value for e in at.exception]
    assert "module_score_weights" in figures(at)
    assert any("Choose **Our module**" in t for t in texts(at, "caption"))


def test_the_sidebar_score_function_reaches_the_our_module_page(bundled):
    state = dict(source="module", m_inputs="random", m_weights="random", m_dmodel=16, m_heads=2, m_score="additive")
    at = run_page("app_pages/module.py", text=TEXT, stage="scores", **state)
    assert not at.exception, [e.value for e in at.exception]
    src = ModuleSource(bundled, d_model=16, n_head=2, inputs="random", weights="random", score="additive")
    x, _, _ = input_vectors(src, TEXT)
    with torch.no_grad():
        _, stages = src.build()(x)
    grid = z_arrays(figures(at)["head_grid"])
    np.testing.assert_allclose(np.stack(grid), stages.scores.numpy(), atol=1e-5)
    assert any("additive scores" in t for t in texts(at, "caption"))


def numpy_head(src: ModuleSource, text: str, head: int, causal: bool) -> dict:
    """kind -> (scaled [query, key], weights [query, key]) of one head in float64 numpy, from the module's weights
    and each score function's formula: projections, score, its default scale, the causal mask, softmax."""
    x = input_vectors(src, text)[0].double().numpy()
    out = {}
    for kind in SCORE_FUNCTIONS:
        m = replace(src, score=kind).build()
        p = {n: t.detach().double().numpy() for n, t in m.state_dict().items()}
        cut = slice(head * m.d_head, (head + 1) * m.d_head)
        q, k = ((x @ p[f"{w}.weight"].T + p[f"{w}.bias"])[:, cut] for w in ("w_q", "w_k"))
        if kind == "general":
            s = q @ p["score_fn.w"][head] @ k.T
        elif kind == "additive":
            hidden = (q @ p["score_fn.w_q"][head].T)[:, None, :] + (k @ p["score_fn.w_k"][head].T)[None, :, :]
            s = np.tanh(hidden) @ p["score_fn.v"][head]
        else:
            s = q @ k.T
        scaled = s / np.sqrt(m.d_head) if kind == "scaled_dot" else s
        z = np.where(np.tril(np.ones(s.shape, bool)), scaled, -np.inf) if causal else scaled
        e = np.exp(z - z.max(-1, keepdims=True))
        out[kind] = (scaled, e / e.sum(-1, keepdims=True))
    return out


def test_the_histograms_and_the_table_cover_every_pair_of_the_head_computed_in_blocks(bundled, monkeypatch):
    src = ModuleSource(bundled, d_model=16, n_head=2, seed=1, inputs="random", weights="random")
    text = "the cat sat on the mat because it was tired and the dog ran off"
    tr = attnviz.trace(src, text, causal=True)
    monkeypatch.setattr(S, "BLOCK_CELLS", 3 * tr.n_keys)  # three query rows at a time, the last block shorter
    assert tr.n_tokens % 3 != 0
    summary = S.head_summary(tr, src, 1)
    window = S.head_window(tr, src, 1, ((2, 9), (1, 6)))
    want = numpy_head(src, text, 1, causal=True)
    assert summary.shape == (tr.n_tokens, tr.n_keys)
    for row in summary.sharpness:
        kind = row["score function"]
        scaled, w = want[kind]
        entropy = -(w * np.log(np.where(w > 0, w, 1.0))).sum(-1).mean()
        got = [row["std of softmax input"], row["mean largest weight"], row["mean entropy"]]
        np.testing.assert_allclose(got, [scaled.std(), w.max(-1).mean(), entropy], rtol=1e-5, err_msg=kind)
        counts, edges = np.histogram(scaled, bins=40, range=(scaled.min(), scaled.max()))
        h = summary.histograms[kind]
        np.testing.assert_allclose(h.edges, edges, rtol=1e-5, atol=1e-5, err_msg=kind)
        assert h.n == scaled.size and np.abs(h.counts - counts).sum() <= 2, kind  # a value on an edge may move
        np.testing.assert_allclose(window[kind], w[2:9, 1:6], atol=1e-6, err_msg=kind)
    with pytest.raises(attnviz.AttnvizError, match="Head 2 does not exist"):
        S.head_summary(tr, src, 2)
