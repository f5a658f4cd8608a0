"""An encoder-decoder is profiled one attention at a time: each part's profile equals the mean of the per-text code
(attnviz.analysis.heads) over that part's traces, as the dashboard traces them."""

from __future__ import annotations

import numpy as np
import pytest
from tiny_families import build

import attnviz
from attnviz.analysis import heads as H
from attnviz.corpus import profile
from attnviz.errors import InputError

TEXTS = ["the cat sat on the mat .", "a dog ran away , the dog was tired ."]
CLARK = ("entropy", "distance", "special", "punctuation", "previous", "next", "self")


@pytest.fixture(scope="module")
def tiny_t5(tmp_path_factory):
    return attnviz.load_model(str(build("t5", tmp_path_factory.mktemp("t5"))))


@pytest.mark.parametrize("part", ["encoder", "decoder", "cross"])
def test_each_part_equals_the_per_text_code(tiny_t5, part):
    prof = profile(tiny_t5, TEXTS, part=part, distances=False, max_tokens=6)
    ours = {}
    for text in TEXTS:
        target = text if part == "encoder" else None  # the decoder reads the model's greedy continuation
        tr = attnviz.trace(tiny_t5, text, target=target, max_tokens=6).part(part)
        sp = H.special_keys(tr, *H.special_tokens_of(tiny_t5.tokenizer))
        for name, v in H.head_stats(tr, sp).values.items():
            ours.setdefault(name, []).append(v)
    assert prof.stats["entropy"].shape == (tiny_t5.layers_per_role[part], tiny_t5.n_head)
    for name in CLARK + (("previous_score",) if part != "cross" else ()):  # cross: target queries, source keys
        np.testing.assert_allclose(prof.stats[name], np.mean(ours[name], 0), atol=1e-5, err_msg=name)
    assert prof.provenance["part"] == part and prof.provenance["settings"]["part"] == part
    assert {e["text_id"] for e in prof.examples} <= set(range(len(TEXTS)))
    if part == "cross":  # queries of the target, keys of the source: no token has both, so no query-key sample
        assert prof.qk is None and "different sequences" in prof.provenance["qk_sample"]["why_not"]
    else:
        assert prof.qk is not None and prof.provenance["qk_sample"]["samples"] > 0


def test_parts_are_asked_for_where_there_are_parts(tiny_t5, tiny_gpt2):
    with pytest.raises(InputError, match="part="):
        profile(tiny_t5, TEXTS)
    with pytest.raises(InputError, match="not an encoder-decoder"):
        profile(tiny_gpt2, TEXTS, part="cross")
