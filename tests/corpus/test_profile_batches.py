"""Texts read a batch a forward (right-padded, one window of every text's whole rows) give the profile of one text a
forward: every statistic, the histogram, the examples with their keys, the seeded head distances and query-key sample;
padding enters nothing, whatever side the tokenizer pads on."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import last_block

from attnviz.corpus import profile
from attnviz.corpus.batch import capture, plan
from attnviz.hf.encode import encode

TEXTS = ["the cat sat on the mat .", "hello world", "a dog ran away , the dog was tired .", "the mat the mat the mat",
         "it was the cat .", "because it was tired the cat ran away , and the dog sat .", "a cat , a dog ."]  # fmt: skip
SETTINGS = dict(shard_size=5, top=4, per_interval=2, distance_rows=3, qk_samples=24, qk_per_text=4, qk_dtype="float32")


def assert_equal_profiles(a, b):
    assert sorted(a.stats) == sorted(b.stats)
    for name in a.stats:
        np.testing.assert_allclose(b.stats[name], a.stats[name], atol=1e-6, err_msg=name)
    np.testing.assert_array_equal(b.histogram, a.histogram)
    np.testing.assert_allclose(b.divergence, a.divergence, atol=1e-7)
    where = lambda e: (e["layer"], e["head"], e["kind"], e["order"], e["text_id"], e["query"], e["keys"])  # noqa: E731
    assert [where(e) for e in b.examples] == [where(e) for e in a.examples] and a.texts == b.texts
    weights = lambda p: np.array([[e["max_weight"], *e["key_weights"]] for e in p.examples if len(e["keys"]) == 8])  # noqa: E731
    np.testing.assert_allclose(weights(b), weights(a), atol=1e-6)
    assert b.provenance["counts"] == a.provenance["counts"]
    assert b.qk.tokens == a.qk.tokens and len(a.qk.tokens) == 24
    for layer in range(a.n_layer):
        for x, y in zip(a.qk.vectors(layer, 0), b.qk.vectors(layer, 0)):
            np.testing.assert_allclose(y, x, atol=1e-5)
        np.testing.assert_array_equal(b.qk.mask(layer), a.qk.mask(layer))


@pytest.mark.parametrize("family", ["tiny_bert", "tiny_gpt2", "tiny_llama"])
def test_batches_give_the_profile_of_one_text_a_forward(family, request):
    loaded = request.getfixturevalue(family)
    encoded = [encode(loaded.tokenizer, t, None, 128) for t in TEXTS[:5]]
    assert len({len(e.ids) for e in encoded}) > 2 and capture(loaded, encoded) is not None  # padded, one window
    one = profile(loaded, TEXTS, batch=1, **SETTINGS)
    assert_equal_profiles(one, profile(loaded, TEXTS, batch=8, **SETTINGS))
    assert one.provenance["settings"]["batch"] == 1


def test_a_decoder_whose_tokenizer_pads_on_the_left(tiny_gpt2):
    """The batch pads on the right whatever the tokenizer's side, so every real token keeps its position."""
    one = profile(tiny_gpt2, TEXTS, batch=1, **SETTINGS)
    side = tiny_gpt2.tokenizer.padding_side
    tiny_gpt2.tokenizer.padding_side = "left"
    try:
        assert_equal_profiles(one, profile(tiny_gpt2, TEXTS, batch=3, batch_tokens=40, **SETTINGS))
    finally:
        tiny_gpt2.tokenizer.padding_side = side


def test_batches_group_texts_of_similar_length_within_their_bounds():
    lengths, ids = np.array([5, 30, 6, 29, 7, 400, 5]), [10, 11, 12, 13, 14, 15, 16]
    got = plan(lengths, ids, most=3, tokens=64, cells=72 * 40 * 40 * 3, per_cell=72)
    assert got == [[0, 2, 6], [4], [1, 3], [5]]  # by length, each batch in id order; 7 and 29 apart (the padding)
    for g in got:
        n = max(lengths[g])
        assert len(g) == 1 or (len(g) <= 3 and len(g) * n <= min(64, 1.5 * sum(lengths[g])))


def test_a_texts_sampled_vectors_hold_its_own_tokens_not_its_batchs(tiny_llama):
    """The query-key sample keeps a chosen text's vectors for the whole run: each must own its tokens' numbers, not be
    a view of the batch's gathered tokens (which kept every text of the batch alive for as long as one was chosen)."""
    from attnviz.corpus.batch import drawn

    encoded = [encode(tiny_llama.tokenizer, t, None, 128) for t in TEXTS[:4]]
    batched = capture(tiny_llama, encoded)
    got = drawn(batched, {10 + i: i for i in range(4)}, seed=0, per_text=3, dtype="float16")
    assert sorted(got) == [10, 11, 12, 13]
    for d in got.values():
        for a in (*d.q, *d.k):
            owner = a if a.base is None else a.base
            assert owner.shape[-2] == len(d.tokens), (owner.shape, len(d.tokens))  # this text's tokens alone


@pytest.mark.parametrize("family", ["tiny_bert", "tiny_gpt2", "tiny_llama"])
@pytest.mark.parametrize("batch", [1, 8])
def test_a_profile_ends_each_forward_after_the_last_attention_call(family, batch, request):
    """A profile reads the attention records alone, so its forward passes (a text a forward, or texts together) stop
    once the last attention call is recorded: the last block's feed-forward and the model's output never run, and
    the profile is the one of the records (test_batches_give_the_profile_of_one_text_a_forward; the per-text and
    numpy checks in test_profile_statistics)."""
    loaded = request.getfixturevalue(family)
    ran, watched = [], (last_block(loaded), loaded.model)
    hooks = [m.register_forward_hook(lambda *_: ran.append(1)) for m in watched]
    try:
        found = profile(loaded, TEXTS, batch=batch, **SETTINGS)
    finally:
        for h in hooks:
            h.remove()
    assert ran == [] and found.provenance["counts"]["texts"] == len(TEXTS)


def test_a_model_the_window_cannot_read_is_profiled_a_text_a_forward_after_one_try(tmp_path):
    """Logit softcapping (Gemma 2) is attention the batch window does not compute, so the first batch's capture says
    so and every other text of the shard is traced alone: one wasted forward a shard (not one per batch, however
    small: here every batch is one text), and the profile of one text a forward."""
    import attnviz
    from tests.tiny_families import build

    loaded = attnviz.load_model(str(build("gemma2", tmp_path / "gemma2")), device="cpu")
    one = profile(loaded, TEXTS, batch=1, **SETTINGS)
    forwards = []
    hook = loaded.model.register_forward_pre_hook(lambda *_: forwards.append(1))
    try:
        found = profile(loaded, TEXTS, batch=2, batch_tokens=4, **SETTINGS)  # every text a batch of its own
    finally:
        hook.remove()
    assert len(forwards) == len(TEXTS) + -(-len(TEXTS) // SETTINGS["shard_size"])  # each text, and a try per shard
    assert_equal_profiles(one, found)


@pytest.mark.parametrize("batch", [1, 8])
def test_layers_that_share_one_attention_module_end_the_forward_at_its_last_call(tmp_path, batch):
    """ALBERT applies one attention module in every layer: the forward ends at its last application (the n_layer-th
    call), not its first, so the profile holds every layer, equal to the mean of the per-text statistics of
    attnviz.trace (the whole forward)."""
    import attnviz
    from attnviz.analysis import heads as H
    from tests.hf.families import build

    loaded = attnviz.load_model(str(build("albert", tmp_path / "albert")), device="cpu")
    assert loaded.n_layer > 1 and len(set(loaded.attention_modules)) == 1
    found = profile(loaded, TEXTS, batch=batch, **SETTINGS)
    per_text = {}
    for text in TEXTS:
        tr = attnviz.trace(loaded, text)
        for name, v in H.head_stats(tr, H.special_keys(tr, *H.special_tokens_of(loaded.tokenizer))).values.items():
            per_text.setdefault(name, []).append(v)
    names = sorted(n for n in set(per_text) & set(found.stats) if not n.endswith("_score"))  # defined per text
    assert {"entropy", "distance", "previous", "self"} <= set(names)
    for name in names:
        np.testing.assert_allclose(found.stats[name], np.nanmean(per_text[name], 0), atol=1e-5, err_msg=name)
