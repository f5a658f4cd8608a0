"""The Words page in AppTest: the word matrix equals merging the trace's weights by hand."""

from __future__ import annotations

import numpy as np
from helpers import figures, run_page, texts, z_arrays

import attnviz

PAGE = "app_pages/words.py"
TEXT = "The unbelievably tired cat snoozed."


def test_words_page_merges_pieces_and_states_the_rule(bundled):
    at = run_page(PAGE, text=TEXT, layer=2, head=4)
    assert not at.exception, [e.value for e in at.exception]
    assert any("sum" in m and "mean" in m for m in texts(at, "markdown"))
    figs = figures(at)
    w = attnviz.trace(bundled, TEXT).layer(2).weights[4]
    groups = [[0], [1], [2, 3, 4, 5, 6], [7], [8], [9, 10, 11, 12], [13], [14]]  # [CLS] the un##bel##ie##va##bly ...
    want = np.array([[w[np.ix_(a, b)].sum(1).mean() for b in groups] for a in groups])
    np.testing.assert_allclose(z_arrays(figs["words_head"])[0], want, atol=1e-6)
    np.testing.assert_allclose(z_arrays(figs["tokens_head"])[0], w, atol=1e-6)
    ticks = figs["words_head"]["layout"]["xaxis"]["ticktext"]
    assert any("unbelievably" in t for t in ticks) and any("snoozed" in t for t in ticks)


def test_every_word_has_its_label_long_merged_words_too(bundled):
    text = ("Tokenizers split unbelievably rare words like antidisestablishmentarianism and incomprehensibilities "
            "into many small pieces, which this page merges back together again.")  # fmt: skip
    at = run_page(PAGE, text=text)
    assert not at.exception, [e.value for e in at.exception]
    fig = figures(at)["words_head"]
    n_words = z_arrays(fig)[0].shape[0]
    assert n_words >= 20  # more words than a half-width chart could label (every other one was)
    for axis in ("xaxis", "yaxis"):
        ticks = fig["layout"][axis]
        assert ticks["tickvals"] == list(range(n_words)), axis
        assert any("antidisestablish" in t for t in ticks["ticktext"]), ticks["ticktext"]
