"""The Sentence pairs page in AppTest: blocks, crossing share and the boundary line from the pair's trace."""

from __future__ import annotations

import numpy as np
from helpers import array, figures, run_page, texts, z_arrays

import attnviz
from attnviz.analysis import pairs as P

PAGE = "app_pages/pairs.py"
TEXT, PAIR = "The cat sat on the mat.", "It was tired."


def test_pairs_page_blocks_crossing_and_boundary(bundled):
    at = run_page(PAGE, text=TEXT, pair=PAIR, layer=1, head=2)
    assert not at.exception, [e.value for e in at.exception]
    tr = attnviz.trace(bundled, TEXT, pair=PAIR)
    boundary = bundled.tokenizer(TEXT, PAIR)["token_type_ids"].index(1)
    w = tr.layer(1).weights
    figs = figures(at)
    bars = {t["name"]: array(t["y"]) for t in figs["pair_blocks"]["data"]}
    for name in P.BLOCKS:
        x, y = name.split("->")
        rows = range(boundary) if x == "A" else range(boundary, tr.n_tokens)
        cols = list(range(boundary)) if y == "A" else list(range(boundary, tr.n_tokens))
        want = np.array([np.mean([w[h, i, cols].sum() for i in rows]) for h in range(tr.n_head)])
        np.testing.assert_allclose(bars[name], want, atol=1e-6, err_msg=name)
    crossing = array(figs["pair_crossing"]["data"][0]["y"])
    np.testing.assert_allclose(crossing, P.block_shares(w, boundary)["crossing"], atol=1e-6)
    np.testing.assert_allclose(z_arrays(figs["pair_head"])[0], w[2], atol=1e-6)
    lines = figs["pair_head"]["layout"]["shapes"]
    assert {s["x0"] for s in lines if s["x0"] == s["x1"]} == {boundary - 0.5}
    assert len(at.dataframe[0].value) == tr.n_head


def test_without_a_second_sentence_the_page_says_what_to_do():
    at = run_page(PAGE, text=TEXT)
    assert not at.exception
    assert any("Second sentence" in i for i in texts(at, "info"))
