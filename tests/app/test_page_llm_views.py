"""The views for real LLMs' attention, in AppTest, each number checked against transformers' eager attention
(computed here with numpy and scipy, not with attnviz): who reads a token (a key's column), the Heads page without its
sink, the sink maps and the leave-out-key-0 option of Head statistics, and key/value groups on the Heads grid."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from helpers import array, figures, run_page, texts, z_arrays
from scipy.spatial.distance import jensenshannon

from tests.hf import families as fm

HEADS, STATS = "app_pages/heads.py", "app_pages/headstats.py"
TEXT = "The cat sat on the mat, because it was tired."


def page(path: str, **state):
    at = run_page(path, text=TEXT, **state)
    assert not at.exception, [e.value for e in at.exception]
    return at


@pytest.fixture(scope="module")
def eager(bundled, bundled_eager, eager_reference):
    """[layer, head, query, key] from the bundled model's own eager attention."""
    return eager_reference(bundled_eager, bundled, TEXT)[0].astype(np.float64)


def renormalised_without_first(w: np.ndarray) -> np.ndarray:
    out = w.copy()
    out[..., 0] = 0
    return out / out.sum(-1, keepdims=True)


def test_who_reads_a_key_shows_every_query_of_every_head_weighting_that_key(eager):
    at = page(HEADS, layer=2, hd_key=3)
    fig = figures(at)["who_reads"]
    assert fig["layout"]["meta"]["key"] == 3 and "who reads 03 sat" in fig["layout"]["title"]["text"]
    (z,) = z_arrays(fig)
    np.testing.assert_allclose(z, eager[2, :, :, 3], rtol=0, atol=1e-5)  # [head, query]
    assert at.selectbox(key="hd_key").value == 3


def test_without_sinks_draws_weights_without_key_0_rows_renormalised_and_says_so(eager):
    at = page(HEADS, layer=1, head=5, hd_nosink=True)
    figs = figures(at)
    grid, detail = z_arrays(figs["head_grid"]), z_arrays(figs["head_detail"])[0]
    expected = renormalised_without_first(eager[1])
    np.testing.assert_allclose(np.stack(grid), expected, rtol=0, atol=1e-5)
    np.testing.assert_allclose(detail, expected[5], rtol=0, atol=1e-5)
    for name in ("head_grid", "head_detail"):
        assert "without key 0 (rows renormalised)" in figs[name]["layout"]["title"]["text"]
    plain = figures(page(HEADS, layer=1, head=5))
    assert "without" not in plain["head_grid"]["layout"]["title"]["text"]
    np.testing.assert_allclose(np.stack(z_arrays(plain["head_grid"])), eager[1], rtol=0, atol=1e-5)


def test_the_sink_map_is_the_mean_share_of_a_row_on_key_0(eager):
    at = page(STATS)
    fig = figures(at)["sink_maps"]
    (z,) = z_arrays(fig)  # the bundled model has no learned sink: one map
    np.testing.assert_allclose(z, eager[..., 0].mean(-1), rtol=0, atol=1e-5)  # [layer, head]; no padding here
    assert "[CLS]" in fig["layout"]["annotations"][0]["text"]
    top = np.unravel_index(np.argmax(eager[..., 0].mean(-1)), z.shape)
    assert any(f"layer {top[0]}, head {top[1]}" in c for c in texts(at, "caption"))


def test_leaving_out_key_0_renormalises_the_statistics_over_the_other_keys(eager):
    at = page(STATS, hs_nosink=True, hs_stat="previous", hs_pick="3-4")
    grid = figures(at)["stat_grid"]
    w = renormalised_without_first(eager)  # [layer, head, query, key]
    n = w.shape[-1]
    previous = np.mean([w[..., i, i - 1] for i in range(1, n)], axis=0)  # query 0 is key 0's own row: left out
    np.testing.assert_allclose(array(grid["data"][0]["z"]), previous, rtol=0, atol=1e-5)
    np.testing.assert_allclose(z_arrays(figures(at)["head_weights"])[0], w[3, 4], rtol=0, atol=1e-5)
    assert "key 0 hidden" in figures(at)["head_weights"]["layout"]["title"]["text"]
    plain = figures(page(STATS, hs_stat="previous"))["stat_grid"]
    assert not np.allclose(array(plain["data"][0]["z"]), previous, atol=1e-3)


def test_a_model_with_learned_sinks_draws_both_maps_on_one_scale(family_dir):
    folder = family_dir("gpt_oss")
    at = run_page(STATS, source="hub", model=str(folder), text="the cat sat on the mat")
    assert not at.exception, [e.value for e in at.exception]
    from transformers import AutoTokenizer

    ids = AutoTokenizer.from_pretrained(folder)("the cat sat on the mat")["input_ids"]
    with torch.no_grad():
        out = fm.eager_model(folder)(input_ids=torch.tensor([ids]), output_attentions=True, use_cache=False)
    w = np.stack([a[0].double().numpy() for a in out.attentions])  # [layer, head, query, key]
    fig = figures(at)["sink_maps"]
    first, learned = z_arrays(fig)
    np.testing.assert_allclose(first, w[..., 0].mean(-1), rtol=0, atol=1e-5)
    np.testing.assert_allclose(learned, (1 - w.sum(-1)).mean(-1), rtol=0, atol=1e-5)
    scales = {(t["zmin"], t["zmax"], t["colorscale"] if isinstance(t["colorscale"], str) else str(t["colorscale"]))
              for t in fig["data"]}  # fmt: skip
    assert len(scales) == 1 and next(iter(scales))[:2] == (0.0, 1.0)


def test_grouped_query_heads_are_drawn_by_group_with_their_divergence(tiny_llama_dir, eager_copy, eager_reference):
    import attnviz

    loaded = attnviz.load_model(str(tiny_llama_dir))
    text = "the cat sat on the mat"
    w = eager_reference(eager_copy(tiny_llama_dir), loaded, text)[0].astype(np.float64)[1]  # layer 1 [head, q, k]
    js = [np.mean([jensenshannon(w[a, i], w[b, i]) ** 2 for i in range(w.shape[1])]) for a, b in ((0, 1), (2, 3))]
    at = run_page(HEADS, source="hub", model=str(tiny_llama_dir), text=text, layer=1)
    assert not at.exception, [e.value for e in at.exception]
    titles = [a["text"] for a in figures(at)["head_grid"]["layout"]["annotations"]]
    assert titles[:4] == [f"group 0 · JS {js[0]:.3f} · head 0", "head 1 · group 0",
                          f"group 1 · JS {js[1]:.3f} · head 2", "head 3 · group 1"]  # fmt: skip
    (table,) = [d.value for d in at.dataframe if "JS divergence" in d.value.columns]
    np.testing.assert_allclose(table["JS divergence"].to_numpy(), js, rtol=1e-4, atol=1e-6)
    assert list(table["heads"]) == ["0, 1", "2, 3"]
    assert any("share 2 key/value heads" in c for c in texts(at, "caption"))


def test_a_model_whose_heads_each_have_their_own_keys_shows_no_groups():
    at = page(HEADS)
    assert [a["text"] for a in figures(at)["head_grid"]["layout"]["annotations"]][:2] == ["head 0", "head 1"]
    assert not any("Key/value groups" in c for c in texts(at, "caption"))
