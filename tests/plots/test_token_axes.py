"""Heatmaps on token axes (Masks, Scaling): the hover names both tokens from the axes' categories, one label per row
and column, so a 128 x 128 window sends its values and 256 labels, not a pair of labels per cell (#28)."""

from __future__ import annotations

import json

import numpy as np

from attnviz.plots import masks

TOKENS = [f"w{i}" for i in range(300)]


def test_mask_panels_name_every_token_from_their_axes_in_a_window_further_on():
    rng = np.random.default_rng(0)
    scaled = rng.normal(size=(128, 128)).astype(np.float32)
    mask = np.tril(np.ones((128, 128), dtype=bool))
    fig = masks.stage_pair(scaled, mask, TOKENS, "head 0", start=100)
    spec = json.loads(fig.to_json())
    for t in (t for t in spec["data"] if t["type"] == "heatmap"):
        assert "customdata" not in t and "text" not in t
        assert "query %{y}" in t["hovertemplate"] and "key %{x}" in t["hovertemplate"]
        assert t["x"][0] == "100 w100" and t["y"][-1] == "227 w227" and len(t["x"]) == 128
    for name in ("xaxis", "yaxis", "xaxis2"):
        ax = spec["layout"][name]
        # category i is token i (placeholders before the window), so shapes and ranges keep token positions
        assert ax["type"] == "category" and ax["categoryarray"].index("150 w150") == 150
        assert sorted(ax["range"]) == [99.5, 227.5]
    assert spec["layout"]["yaxis"]["range"][0] > spec["layout"]["yaxis"]["range"][1]  # query 100 at the top
    assert len(fig.to_json()) < 300_000  # two 128 x 128 float32 maps (~175 kB) and the labels


def test_a_weights_comparison_of_a_cross_attention_names_the_other_texts_keys():
    without = np.full((3, 5), 0.2, dtype=np.float32)
    fig = masks.weights_comparison(without, without, ["a", "b", "c"], "head 0", key_tokens=list("vwxyz"))
    heat = [t for t in fig.data if t.type == "heatmap"]
    assert len(heat) == 3 and all(list(t.x) == ["00 v", "01 w", "02 x", "03 y", "04 z"] for t in heat)
    assert all(list(t.y) == ["00 a", "01 b", "02 c"] for t in heat)
