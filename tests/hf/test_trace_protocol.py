"""The one read path of a trace: `stages` for a window, `column` for one key, `has` / `why_not` for what it can give,
`kv_groups` for grouped-query heads, and the tokenizer's word and sequence ids kept on both sides."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import attnviz
from attnviz import AttentionTrace, AttnvizError
from attnviz.analysis import pairs as P
from attnviz.analysis import words as W
from attnviz.export import load_npz, trace_npz
from attnviz.trace import layers as trace_layers

TEXT = "The cat sat on the mat because it was tired."


def _numpy_weights(trace: AttentionTrace, layer: int) -> np.ndarray:
    """[head, query, key] weights by hand in float64 from the trace's own q, k, scale, mask and fill: an independent
    softmax over each full row (no torch, no attnviz stage function)."""
    facts = trace.facts(layer)
    rows = []
    for h in range(trace.n_head):
        q, k = (np.asarray(a, np.float64) for a in trace.vectors(layer, h))
        masked = np.where(facts.mask, q @ k.T * facts.scale, facts.fill)
        e = np.exp(masked - masked.max(-1, keepdims=True))
        rows.append(e / e.sum(-1, keepdims=True))
    return np.stack(rows)


@pytest.fixture(scope="module")
def traces(bundled, tiny_gpt2, tiny_llama, tiny_text):
    """Padded bidirectional, causal and padded, grouped-query."""
    return {
        "bert padded": attnviz.trace(bundled, TEXT, pad_to=16),
        "gpt2 causal padded": attnviz.trace(tiny_gpt2, tiny_text, pad_to=15),
        "llama grouped": attnviz.trace(tiny_llama, tiny_text),
    }


@pytest.mark.parametrize("name", ["bert padded", "gpt2 causal padded", "llama grouped"])
def test_a_column_is_the_full_matrix_column_and_a_numpy_softmax_over_each_full_row(name, traces):
    tr = traces[name]
    layer = tr.n_layer - 1
    full, by_hand = tr.stages(layer).weights, _numpy_weights(tr, layer)
    for key in (0, 2, tr.n_keys - 1):
        col = tr.column(layer, key)
        assert col.shape == (tr.n_head, tr.n_tokens) and col.dtype == np.float32 and not col.flags.writeable
        np.testing.assert_allclose(col, full[..., key], rtol=0, atol=1e-6)
        np.testing.assert_allclose(col, by_hand[..., key], rtol=0, atol=1e-5)
    np.testing.assert_array_equal(tr.column(layer, 2, heads=[3, 1]), tr.column(layer, 2)[[3, 1]])
    assert (tr.column(layer, 2)[:, :2] == 0).all() == (name != "bert padded")  # causal: earlier queries give 0
    assert (tr.column(layer, tr.n_keys - 1) == 0).all() == ("padded" in name)  # a padding key takes nothing


def test_a_window_of_queries_and_keys_chosen_separately_keeps_every_key_in_the_softmax(traces):
    tr = traces["bert padded"]
    full = tr.stages(2)
    part = tr.stages(2, heads=[5, 0], queries=(3, 9), keys=(1, 4))
    for name in attnviz.STAGES:
        np.testing.assert_allclose(getattr(part, name), getattr(full, name)[[5, 0], 3:9, 1:4], rtol=1e-6, atol=1e-6)
    assert part.weights.sum(-1).max() < 1  # a window of keys: the rest of each row went to the other keys
    one = tr.stages(2, heads=7)
    assert one.weights.shape == (1, tr.n_tokens, tr.n_keys)
    with pytest.raises(attnviz.InputError, match="window"):
        tr.stages(2, queries=(5, 5))
    with pytest.raises(attnviz.InputError, match="head"):
        tr.stages(2, heads=[12])


def _repeat_kv(k: torch.Tensor, n_rep: int) -> torch.Tensor:
    from transformers.models.llama.modeling_llama import repeat_kv

    return repeat_kv(k[None], n_rep)[0]


@pytest.mark.parametrize("n_kv", [2, 1], ids=["grouped-query", "multi-query"])
def test_kv_groups_follow_transformers_repeat_kv(n_kv, tiny_llama, tiny_text):
    from transformers import LlamaConfig, LlamaModel

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=tiny_llama.model.config.vocab_size, hidden_size=32, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=n_kv, intermediate_size=64)  # fmt: skip
    tr = attnviz.trace(attnviz.from_model(LlamaModel(config), tiny_llama.tokenizer), tiny_text)
    assert tr.kv_groups == {2: ((0, 1), (2, 3)), 1: ((0, 1, 2, 3),)}[n_kv]
    keys = torch.from_numpy(np.stack([tr.vectors(1, h)[1] for h in range(tr.n_head)]))  # the key each head reads
    kv = torch.from_numpy(np.stack([tr.vectors(1, g[0])[1] for g in tr.kv_groups]))  # one per key/value head
    torch.testing.assert_close(keys, _repeat_kv(kv, tr.n_head // n_kv), rtol=0, atol=0)
    assert attnviz.trace(attnviz.load_model(), "a b").kv_groups == tuple((h,) for h in range(12))


def test_has_and_why_not_for_every_kind_of_trace(bundled, tiny_xlnet_dir, tiny_text, family_dir):
    w = np.full((1, 2, 3, 3), 1 / 3, np.float32)
    s2s = attnviz.trace(attnviz.load_model(str(family_dir("t5"))), "the cat sat", target="a dog ran")
    module = attnviz.ModuleSource(bundled, d_model=16, n_head=2, inputs="random")
    kinds = {  # trace -> what it cannot give
        "pretrained": (attnviz.trace(bundled, TEXT), ()),
        "t5 encoder": (s2s.encoder, ()),
        "t5 decoder": (s2s.decoder, ()),
        "t5 cross": (s2s.cross, ()),
        "our module": (attnviz.trace(module, TEXT), ()),
        "our module, additive score": (attnviz.trace(attnviz.ModuleSource(**{**module.__dict__, "score": "additive"}), TEXT), ("vectors",)),
        "from scores": (AttentionTrace.from_scores(list("abc"), np.zeros((1, 2, 3, 3)), 0.5), ("vectors", "values")),
        "reopened file": (load_npz(trace_npz(attnviz.trace(bundled, "a b"))), ()),  # the file keeps q, k and values
        "given weights": (AttentionTrace.from_attentions([torch.from_numpy(w)], list("abc")), ("scores", "scaled", "masked", "vectors", "values")),
        "own code (XLNet)": (attnviz.trace(attnviz.load_model(str(tiny_xlnet_dir)), tiny_text), ("scores", "scaled", "masked", "vectors", "values")),
    }  # fmt: skip
    for name, (tr, missing) in kinds.items():
        for stage in trace_layers.CAPABILITIES:
            reason = tr.why_not(stage)
            assert tr.has(stage) == (stage not in missing) == (reason is None), (name, stage)
            if reason is not None:
                assert reason.startswith("This trace gives no") and len(reason) > 40, (name, reason)
                if stage in attnviz.STAGES:
                    assert getattr(tr.stages(0), stage) is None
                    with pytest.raises(AttnvizError, match="gives no"):
                        tr.stage(stage)
        assert tr.available_stages == tuple(s for s in attnviz.STAGES if s not in missing)
    assert "own code" in kinds["own code (XLNet)"][0].why_not("scores")
    with pytest.raises(AttnvizError, match="must be one of"):
        kinds["pretrained"][0].has("probabilities")


def test_encode_keeps_the_tokenizers_word_and_sequence_ids(bundled):
    tr = attnviz.trace(bundled, "Tokenizers split unbelievably rare words.", pair="A dog ran.", pad_to=24)
    enc = bundled.tokenizer("Tokenizers split unbelievably rare words.", "A dog ran.")
    n = len(enc["input_ids"])
    assert tr.word_ids[:n] == tuple(enc.word_ids()) and tr.sequence_ids[:n] == tuple(enc.sequence_ids())
    assert set(tr.word_ids[n:]) == set(tr.sequence_ids[n:]) == {None}  # padding belongs to no word or text
    assert tr.key_word_ids == tr.word_ids  # self-attention: the keys are the same tokens
    groups, key_groups = W.trace_groups(tr)
    assert groups == key_groups == W.word_groups(tr.tokens, "wordpiece")  # where markers are right, they agree
    assert P.pair_boundary(tr) == (tr.sequence_ids.index(1), P.SEQUENCE_RULE)
    assert P.pair_boundary(tr)[0] == P.segment_boundary(tr.tokens)  # the separator rule finds the same place


def test_byte_level_word_ids_keep_apart_what_markers_merge(gpt2_bpe_dir):
    """GPT-2 joins a pair with no separator and its second text starts without a space marker: the markers merge the
    last piece of sentence A with the first of B, the tokenizer's word ids do not; its sequence ids give B's start
    without tokenizing sentence A again."""
    loaded = attnviz.load_model(str(gpt2_bpe_dir))
    tr = attnviz.trace(loaded, "The cat sat.", pair="A dog ran away.")
    b = tr.tokens.index("A")
    markers, ids = W.word_groups(tr.tokens, "bpe"), W.trace_groups(tr)[0]
    assert any(b - 1 in g and b in g for g in markers)  # "sat", "." and "A" glued into one word
    assert [b - 1] in ids and [b] in ids  # ".", and the first word of sentence B
    assert P.pair_boundary(tr) == (b, P.SEQUENCE_RULE) and b == len(loaded.tokenizer("The cat sat.")["input_ids"])


def test_cross_attention_keeps_target_words_on_the_queries_and_source_words_on_the_keys(family_dir):
    s2s = attnviz.trace(attnviz.load_model(str(family_dir("bart"))), "the cat sat on the mat", target="a dog ran")
    cross = s2s.cross
    assert (cross.word_ids, cross.key_word_ids) == (s2s.decoder.word_ids, s2s.encoder.word_ids)
    assert cross.word_ids == (None, *range(cross.n_tokens - 1))  # the start token, then the target shifted right
    assert cross.n_tokens != cross.n_keys  # 3 target tokens over 6 source tokens: no side can stand in for the other
    groups, key_groups = W.trace_groups(cross)
    merged = W.merge_words(cross.stages(1).weights, groups, key_groups)
    assert merged.shape == (cross.n_head, len(groups), len(key_groups)) == (cross.n_head, cross.n_tokens, cross.n_keys)
    np.testing.assert_allclose(merged.sum(-1), 1, rtol=1e-6)
