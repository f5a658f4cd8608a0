"""Encoder-decoder models in a real Chromium: T5 and BART, their encoder, decoder and cross attentions."""

from __future__ import annotations

import json
from urllib.parse import urlencode

import pytest
from browserkit import POLL_MS
from tiny_families import build

SOURCE, TARGET = "the cat sat on the mat", "a dog ran away"


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    return {kind: build(kind, tmp_path_factory.mktemp(kind)) for kind in ("t5", "bart")}


def _heatmap_shape(tab) -> tuple[int, int]:
    """(rows, columns) of the single-head heatmap as drawn, read from Plotly's own data in the page (waited for: it
    is drawn after the grid, so 'two charts drawn' can come before it)."""
    tab.page.wait_for_function(
        """() => [...document.querySelectorAll('.js-plotly-plot')].some(
                     g => ((g.layout || {}).meta || {}).figure === 'head_detail' && g.data)""",
        timeout=90_000,
        polling=POLL_MS,
    )
    shape = tab.page.evaluate(
        """() => { const gd = [...document.querySelectorAll('.js-plotly-plot')].find(
                       g => ((g.layout || {}).meta || {}).figure === 'head_detail');
                   const z = gd.data.find(t => t.type === 'heatmap').z;
                   return z.bdata ? z.shape : [z.length, z[0].length]; }"""
    )
    return tuple(int(v) for v in (shape.split(",") if isinstance(shape, str) else shape))


@pytest.mark.parametrize("kind", ["t5", "bart"])
def test_each_attention_of_an_encoder_decoder_is_drawn(tab, folders, kind):
    shapes = {}
    for part in ("encoder", "decoder", "cross"):
        query = urlencode(dict(text=SOURCE, source="hub", model=str(folders[kind]), target=TARGET, part=part))
        tab.open(f"?{query}", charts=2)
        assert tab.errors_on_page() == [], (kind, part)
        assert "Traceback" not in tab.page.inner_text("body")
        shapes[part] = _heatmap_shape(tab)
        tab.shot(f"seq2seq-{kind}-{part}")
    n_src, n_tgt = shapes["encoder"][0], shapes["decoder"][0]
    assert shapes["encoder"] == (n_src, n_src) and shapes["decoder"] == (n_tgt, n_tgt)
    assert shapes["cross"] == (n_tgt, n_src), json.dumps(shapes)  # target queries over source keys
    assert n_src != n_tgt  # the source has more tokens than the target here
