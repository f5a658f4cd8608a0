"""A profile's sample of every head's queries and keys (attnviz.corpus.qk_sample, qk_store): halves merge to one
pass, the stored vectors are a grouped-query Llama's rotated q and k recomputed with transformers' own code, the mask
keeps pairs within one text, the folder round-trips, and files of another size or content are refused."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest
import torch

from attnviz.corpus import open_corpus, open_profile, profile
from attnviz.corpus.qk_sample import Choice, Drawn, eligible, text_priority
from attnviz.corpus.qk_store import sample_geometry
from attnviz.corpus.shard import run_shard
from attnviz.corpus.state import Settings
from attnviz.errors import InputError

TEXTS = ["the cat sat on the mat .", "a dog ran away , the dog was tired .", "hello world", "it was the cat .",
         "the mat the mat the mat", "because it was tired the cat ran away .", "the dog sat", "a cat , a dog ."]  # fmt: skip
QK = dict(qk_samples=20, qk_per_text=4, distances=False)


@pytest.fixture(scope="module")
def llama_profile(tiny_llama):
    return profile(tiny_llama, TEXTS, qk_dtype="float32", **QK)


def test_the_choice_of_texts_merges_exactly_whatever_the_order():
    lengths = {i: 1 + (7 * i) % 13 for i in range(300)}
    one = Choice.empty(50, 6, seed=3)
    for i in range(300):
        one.update(i, lengths[i])
    parts = [Choice.empty(50, 6, seed=3) for _ in range(3)]
    for i in np.random.default_rng(0).permutation(300):
        parts[i % 3].update(int(i), lengths[i])
    merged = parts[2].merge(parts[0]).merge(parts[1])
    assert merged.chosen() == one.chosen()
    taken = one.chosen()
    assert sum(n for _, n in taken) == 50 and all(n <= min(6, lengths[t]) for t, n in taken)
    # the texts are those of the smallest seeded priorities: another seed takes others
    other = Choice.empty(50, 6, seed=4)
    for i in range(300):
        other.update(i, lengths[i])
    assert {t for t, _ in other.chosen()} != {t for t, _ in taken}
    again = Choice.from_arrays(one.arrays(), 50, 6, 3)
    assert again.chosen() == taken
    with pytest.raises(InputError, match="other settings"):
        Choice.from_arrays(one.arrays(), 50, 6, 4)


def test_shards_merge_to_one_pass_and_a_rerun_traces_its_chosen_texts_again(tiny_llama, llama_profile, tmp_path):
    out, args = tmp_path / "prof", dict(shard_size=3, qk_dtype="float32", **QK)
    sharded = profile(tiny_llama, TEXTS, out=out, **args)  # three shards merged; vectors held from their traces
    with np.load(out / "shards" / "shard-000000.npz") as z:  # a shard's file keeps the choice, never the vectors
        assert sorted(k for k in z.files if k.startswith("qk/")) == ["qk/count", "qk/meta", "qk/prio", "qk/text"]
    reread = profile(tiny_llama, TEXTS, out=out, **args)  # every shard read back: the chosen texts traced again
    one = llama_profile.qk  # one shard, one pass
    assert sharded.qk.tokens == reread.qk.tokens == one.tokens and one.n == 20
    for layer in range(2):
        for head in range(4):
            for a, b, c in zip(
                sharded.qk.vectors(layer, head), reread.qk.vectors(layer, head), one.vectors(layer, head)
            ):
                # other shards read other batches (attnviz.corpus.batch): the same q and k up to float rounding
                np.testing.assert_allclose(a, c, rtol=1e-6, atol=1e-7)
                np.testing.assert_allclose(b, c, rtol=1e-6, atol=1e-7)


def test_a_shard_copies_no_vectors_of_a_text_the_shards_before_it_leave_no_room_for(tiny_llama):
    """A shard's own choice starts empty, so it keeps nearly every text of its own a while and copied their vectors;
    told where the choice of the shards before it ends (`bound`, Choice.last), it holds none of a text after that,
    chooses the same (its state, the one a shard file keeps, is unchanged) and still holds every text the whole
    chooses (so none is traced again at the end). Holding past the bound fails the first check."""
    s, corpus = Settings(shard_size=4, qk_samples=8, qk_per_text=2, distances=False), open_corpus(TEXTS)
    first = run_shard(tiny_llama, corpus, s, 0)
    bound = first.qk.last()
    alone, told = run_shard(tiny_llama, corpus, s, 1), run_shard(tiny_llama, corpus, s, 1, bound=bound)
    after = {t for t in alone.qk.held if (text_priority(s.seed, t), t) > bound}
    assert after and set(told.qk.held) == set(alone.qk.held) - after  # alone, it held texts the whole never chooses
    for k, v in alone.qk.arrays().items():
        np.testing.assert_array_equal(told.qk.arrays()[k], v)
    whole = first.merge(told).qk
    assert {t for t, _ in whole.chosen()} <= set(whole.held)


def _rotated(model, ids: list[int]):
    """Per layer: q [head, token, d] and k [kv_head, token, d] after rotary, from transformers' own code."""
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

    n_head, n_kv, d = model.config.num_attention_heads, model.config.num_key_value_heads, model.config.head_dim
    x_ids = torch.tensor([ids])
    out = []
    with torch.no_grad():
        hidden = model(input_ids=x_ids, output_hidden_states=True).hidden_states
        for layer, block in enumerate(model.layers):
            x = block.input_layernorm(hidden[layer])
            q = block.self_attn.q_proj(x).view(1, -1, n_head, d).transpose(1, 2)
            k = block.self_attn.k_proj(x).view(1, -1, n_kv, d).transpose(1, 2)
            cos, sin = model.rotary_emb(x, torch.arange(len(ids))[None])
            q, k = apply_rotary_pos_emb(q, k, cos, sin)
            out.append((q[0].numpy(), k[0].numpy()))
    return out


def test_the_sample_is_the_models_rotated_vectors_with_the_groups_keys(
    tiny_llama, tiny_llama_dir, eager_copy, llama_profile
):
    sample, model = llama_profile.qk, eager_copy(tiny_llama_dir)
    assert sample.n == 20 and llama_profile.provenance["qk_sample"] == {"samples": 20, "texts": len(sample.per_text())}
    texts = {t["text_id"] for t in sample.tokens}
    assert len(texts) >= 5  # at most 4 tokens a text
    for text_id in texts:
        ids = tiny_llama.tokenizer(TEXTS[text_id])["input_ids"]
        rotated = _rotated(model, ids)
        rows = [i for i, t in enumerate(sample.tokens) if t["text_id"] == text_id]
        pos = [sample.tokens[i]["position"] for i in rows]
        tokens = tiny_llama.tokenizer.convert_ids_to_tokens(ids)
        assert [sample.tokens[i]["token"] for i in rows] == [tokens[p] for p in pos]
        for layer, (q, k) in enumerate(rotated):
            for head in range(4):
                ours_q, ours_k = sample.vectors(layer, head)
                np.testing.assert_allclose(ours_q[rows], q[head, pos], atol=1e-5)
                np.testing.assert_allclose(ours_k[rows], k[head // 2, pos], atol=1e-5)  # 4 query heads, 2 kv heads
    # the mask: a query meets only keys of its own text, and (causal) at or before its position
    ids = np.array([t["text_id"] for t in sample.tokens])
    at = np.array([t["position"] for t in sample.tokens])
    want = (ids[:, None] == ids[None]) & (at[None] <= at[:, None])
    np.testing.assert_array_equal(sample.mask(1), want)


def test_the_correlation_counts_pairs_within_a_text_only(llama_profile):
    sample = llama_profile.qk
    q, k = (v.astype(np.float64) for v in sample.vectors(1, 3))
    ids = np.array([t["text_id"] for t in sample.tokens])
    at = np.array([t["position"] for t in sample.tokens])
    i, j = np.nonzero((ids[:, None] == ids[None]) & (at[None] <= at[:, None]))
    score, dist = np.einsum("pd,pd->p", q[i], k[j]) * sample.scale[1], -np.linalg.norm(q[i] - k[j], axis=1)
    for v in (score, dist):  # each centred on its query row's mean, as a softmax compares a row
        v -= np.array([v[i == r].mean() for r in i])
    geo = sample_geometry(sample, 1, 3)
    assert geo.before == pytest.approx(np.corrcoef(score, dist)[0, 1], abs=1e-9)
    assert geo.xy.shape == (40, 2) and geo.is_key.sum() == 20


def test_the_folder_round_trips_in_float16_and_refuses_other_files(tiny_llama, llama_profile, tmp_path):
    saved = profile(tiny_llama, TEXTS, **QK)
    saved.save(tmp_path / "p")
    again = open_profile(tmp_path / "p")
    assert again.qk.tokens == saved.qk.tokens and again.provenance["qk_sample"] == saved.provenance["qk_sample"]
    for layer in range(2):
        np.testing.assert_array_equal(again.qk.mask(layer), saved.qk.mask(layer))
        for head in range(4):
            for a, b in zip(again.qk.vectors(layer, head), saved.qk.vectors(layer, head)):
                np.testing.assert_array_equal(a, b)
    stored = np.load(tmp_path / "p" / "qk" / "q-001.npy")
    assert stored.dtype == np.float16 and stored.shape == (4, 20, 8)  # [head, token, d]: 20 x 8 x 2 bytes a head
    exact = llama_profile.qk.vectors(1, 2)[0]
    np.testing.assert_allclose(again.qk.vectors(1, 2)[0], exact, rtol=2**-10, atol=1e-6)

    folder = tmp_path / "p" / "qk"
    bigger = np.concatenate([stored, stored], axis=1)  # 40 tokens where 20 are declared
    np.save(folder / "q-001.npy", bigger)
    with pytest.raises(InputError, match="not the"):
        open_profile(tmp_path / "p")
    changed = stored.copy()
    changed[0, 0, 0] += 1
    np.save(folder / "q-001.npy", changed)  # the same size, other bytes: refused when its layer is read
    opened = open_profile(tmp_path / "p")
    opened.qk.vectors(0, 0)
    with pytest.raises(InputError, match="changed after"):
        opened.qk.vectors(1, 0)
    np.save(folder / "q-001.npy", stored)
    # a record that declares a larger sample, with its checksum made again: refused by the bound, before any read
    path = tmp_path / "p" / "provenance.json"
    record = json.loads(path.read_text())
    record["qk_sample"]["samples"] = 10**9
    body = {k: v for k, v in record.items() if k != "checksum"}
    record["checksum"] = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()
    path.write_text(json.dumps(record))
    with pytest.raises(InputError, match="at most 5,000"):
        open_profile(tmp_path / "p")
    record["qk_sample"] = dict(record["qk_sample"], samples=20, notes=5)  # a value of another type: said, not raised
    body = {k: v for k, v in record.items() if k != "checksum"}
    record["checksum"] = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()
    path.write_text(json.dumps(record))
    with pytest.raises(InputError, match="cannot be read"):
        open_profile(tmp_path / "p")


def test_no_sample_is_said_and_the_settings_are_bounded(tiny_gpt2):
    prof = profile(tiny_gpt2, TEXTS[:1], qk_samples=0, distances=False)
    assert prof.qk is None and "qk_sample" not in prof.provenance
    with pytest.raises(InputError, match="qk_samples must be"):
        profile(tiny_gpt2, TEXTS[:1], qk_samples=10**6)
    assert sorted(eligible(0, 5, 3, 4).tolist()) == [0, 1, 2]  # a short text gives every token


def test_float16_storage_falls_back_to_float32_past_its_range():
    small, big = np.ones((2, 3, 4), np.float32), np.full((2, 3, 4), 7e4, np.float32)
    drawn = lambda k: Drawn([small], [k], [np.ones((3, 3), bool)], [{}] * 3, [1.0], [[]])  # noqa: E731
    assert drawn(small).stored("float16").q[0].dtype == np.float16
    kept = drawn(big).stored("float16")
    assert kept.k[0].dtype == np.float32 and kept.k[0].max() == 7e4  # 70,000 would be inf in float16
