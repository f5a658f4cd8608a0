"""Masks by structure and the row log-sum-exp on real models: the structure equals the mask transformers' eager
attention applied (read from which cells got weight), and a column or a window read through the log-sum-exp equals a
float64 numpy softmax of the full rows, made from the trace's own q and k. Then a 16,384-token tiny Llama."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy.special import logsumexp

import attnviz
from attnviz import AttentionTrace
from attnviz.hf import passes, recorder

TEXT = "the cat sat on the mat because it was tired ."


def _eager_weights(model, ids, attention_mask=None, **extra) -> np.ndarray:
    """[layer, head, query, key] of transformers' eager attention, batch item 0."""
    inputs = {"input_ids": torch.tensor([ids])}
    if attention_mask is not None:
        inputs["attention_mask"] = torch.tensor([attention_mask])
    with torch.no_grad():
        out = model(**inputs, **extra, output_attentions=True, **passes.call_kwargs(model))
    return np.stack([a[0].float().numpy() for a in out.attentions])


def _assert_mask_is_what_eager_applied(mask: np.ndarray, weights: np.ndarray) -> None:
    """Cells eager gave weight are the visible ones; a row with no visible key is spread evenly (fill everywhere)."""
    live = mask.any(-1)
    np.testing.assert_array_equal(weights[:, live] > 0, np.broadcast_to(mask[live], weights[:, live].shape))
    np.testing.assert_allclose(weights[:, ~live], 1 / mask.shape[1], rtol=1e-6)


def _numpy_rows(trace: AttentionTrace, layer: int) -> np.ndarray:
    """[head, query, key + sink] masked scores in float64 from the trace's q, k, scale, mask and fill."""
    facts = trace.facts(layer)
    rows = []
    for h in range(trace.n_head):
        q, k = (np.asarray(a, np.float64) for a in trace.vectors(layer, h))
        rows.append(np.where(facts.mask, q @ k.T * facts.scale, facts.fill))
    return np.stack(rows)


def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def _assert_lse_column_and_window_are_the_full_softmax(trace: AttentionTrace) -> None:
    for layer in range(trace.n_layer):
        rows = _numpy_rows(trace, layer)
        full = _softmax(rows)
        # float32 scores carry about an ulp of their size, and exp(masked - lse) passes that on to a weight: 1e-5 at
        # the bundled model's scores of 40 (its full-row softmax agrees to 3e-7 only because a shared shift cancels)
        tol = 1e-6 + 4 * np.finfo(np.float32).eps * np.abs(rows[rows > trace.facts(layer).fill]).max()
        np.testing.assert_allclose(trace.lse(layer), logsumexp(rows, -1), rtol=0, atol=tol)
        for key in (0, trace.n_keys // 2, trace.n_keys - 1):
            np.testing.assert_allclose(trace.column(layer, key), full[..., key], rtol=0, atol=tol)
        q, k = (1, trace.n_tokens - 1), (trace.n_keys // 3, trace.n_keys - 2)
        part = trace.stages(layer, queries=q, keys=k).weights
        np.testing.assert_allclose(part, full[:, slice(*q), slice(*k)], rtol=0, atol=tol)


def _saved(model, tokenizer, folder):
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def sliding(tiny_llama, tmp_path_factory):
    """A tiny Mistral with a sliding window of 4 keys, saved so that eager attention can load it independently."""
    from transformers import MistralConfig, MistralModel

    torch.manual_seed(0)
    config = MistralConfig(vocab_size=tiny_llama.model.config.vocab_size, hidden_size=32, num_hidden_layers=2,
                           num_attention_heads=4, num_key_value_heads=2, intermediate_size=64, sliding_window=4,
                           max_position_embeddings=64)  # fmt: skip
    return _saved(MistralModel(config), tiny_llama.tokenizer, tmp_path_factory.mktemp("mistral-window"))


def test_structure_equals_eager_mask_causal_padded_hidden_and_sliding(bundled, bundled_eager, tiny_gpt2, eager_copy,
                                                                       tiny_gpt2_dir, sliding):  # fmt: skip
    n_bert, n_gpt2 = attnviz.trace(bundled, TEXT).n_tokens, attnviz.trace(tiny_gpt2, TEXT).n_tokens
    cases = {  # trace, eager model, the structure's kind, real tokens before the padding
        "bert padded right": (attnviz.trace(bundled, TEXT, pad_to=16), bundled_eager, "other", n_bert),
        "gpt2 causal padded": (attnviz.trace(tiny_gpt2, TEXT, pad_to=15), eager_copy(tiny_gpt2_dir), "other", n_gpt2),
        "gpt2 causal": (attnviz.trace(tiny_gpt2, TEXT), eager_copy(tiny_gpt2_dir), "causal", None),
        "bert": (attnviz.trace(bundled, TEXT), bundled_eager, "all", None),
        "sliding window": (attnviz.trace(attnviz.load_model(str(sliding)), TEXT), eager_copy(sliding), "other", None),
    }
    for name, (tr, eager, kind, n_real) in cases.items():
        am = None if n_real is None else [1] * n_real + [0] * (tr.n_tokens - n_real)
        weights = _eager_weights(eager, list(tr.provenance.input_ids), am)
        for layer in range(tr.n_layer):
            structure = tr.facts(layer).structure
            assert structure.kind == kind and not structure.is_dense and structure.flips is None, (name, structure)
            _assert_mask_is_what_eager_applied(tr.layer_mask(layer), weights[layer])
    window = cases["sliding window"][0].facts(0).structure
    assert window.causal and window.window == 4


def test_a_hide_experiment_is_a_key_vector(bundled):
    tr = attnviz.trace(bundled, TEXT, hide=(2, 5), causal=True)
    s = tr.facts(0).structure
    assert s.causal and s.keys.numpy().tolist() == [i not in (2, 5) for i in range(tr.n_tokens)]
    np.testing.assert_array_equal(tr.layer_mask(0), np.tril(np.ones((tr.n_tokens,) * 2, bool)) & s.keys.numpy())


def test_left_padding_gives_dead_rows_that_the_lse_spreads_evenly_as_eager_does(tiny_llama, tiny_llama_dir, eager_copy):
    ids = tiny_llama.tokenizer(TEXT)["input_ids"][:9]
    am = [0, 0, 0] + [1] * 6
    rec = recorder.Recorder()
    passes.forward(tiny_llama.model, {"input_ids": torch.tensor([ids]), "attention_mask": torch.tensor([am])}, rec)
    tr = AttentionTrace([str(i) for i in ids], tuple(rec.layers))
    weights = _eager_weights(eager_copy(tiny_llama_dir), ids, am)
    for layer in range(tr.n_layer):
        s = tr.facts(layer).structure
        assert s.causal and s.keys.numpy().tolist() == [bool(a) for a in am] and s.flips is None
        _assert_mask_is_what_eager_applied(tr.layer_mask(layer), weights[layer])
        for key in (0, 4, 8):  # every row, dead ones included, as eager weighs it
            np.testing.assert_allclose(tr.column(layer, key), weights[layer][..., key], rtol=0, atol=1e-5)


@pytest.mark.parametrize("kind", ["t5", "bart"])
def test_cross_attention_masks_are_structures_equal_to_eager(kind, family_dir):
    folder = family_dir(kind)
    tr = attnviz.trace(attnviz.load_model(str(folder)), "the cat sat on the mat", target="a dog ran away")
    from transformers import AutoModelForSeq2SeqLM

    eager = AutoModelForSeq2SeqLM.from_pretrained(folder, attn_implementation="eager").eval()
    ids, target = list(tr.encoder.provenance.input_ids), list(tr.decoder.provenance.input_ids)
    with torch.no_grad():
        out = eager(input_ids=torch.tensor([ids]), decoder_input_ids=torch.tensor([target]), output_attentions=True)
    for layer in range(tr.cross.n_layer):
        s = tr.cross.facts(layer).structure
        assert s.shape == (tr.cross.n_tokens, tr.cross.n_keys) and not s.is_dense and s.kind == "all"
        _assert_mask_is_what_eager_applied(tr.cross.layer_mask(layer), out.cross_attentions[layer][0].numpy())
        assert tr.decoder.facts(layer).structure.causal
    _assert_lse_column_and_window_are_the_full_softmax(tr.cross)


@pytest.mark.parametrize("n_kv", [2, 1], ids=["grouped-query", "multi-query"])
def test_lse_column_and_window_on_grouped_and_multi_query_layers(n_kv, tiny_llama):
    from transformers import LlamaConfig, LlamaModel

    torch.manual_seed(1)
    config = LlamaConfig(vocab_size=tiny_llama.model.config.vocab_size, hidden_size=32, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=n_kv, intermediate_size=64)  # fmt: skip
    tr = attnviz.trace(attnviz.from_model(LlamaModel(config), tiny_llama.tokenizer), TEXT, pad_to=14)
    assert tr.layers[0].k.shape[0] == n_kv  # key heads kept unexpanded
    _assert_lse_column_and_window_are_the_full_softmax(tr)


def test_lse_column_and_window_on_causal_padded_and_sliding_layers(bundled, tiny_gpt2, sliding):
    for tr in (attnviz.trace(bundled, TEXT, pad_to=16), attnviz.trace(tiny_gpt2, TEXT, pad_to=15),
               attnviz.trace(attnviz.load_model(str(sliding)), TEXT)):  # fmt: skip
        _assert_lse_column_and_window_are_the_full_softmax(tr)


N = 16_384


def test_a_16k_token_trace_of_a_tiny_llama_holds_under_150_mb_and_reads_exactly(family_dir, monkeypatch):
    """4 layers, 8 heads, 2 key/value heads, width 256: q, k, the mask's structure and the row norms only."""
    from transformers import AutoTokenizer, LlamaConfig, LlamaModel

    monkeypatch.setenv("ATTNVIZ_MAX_TOKENS", str(N))
    tokenizer = AutoTokenizer.from_pretrained(family_dir("long_llama"))
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=256, num_hidden_layers=4, num_attention_heads=8,
                         num_key_value_heads=2, head_dim=32, intermediate_size=512, max_position_embeddings=N,
                         rope_parameters={"rope_type": "default", "rope_theta": 10000.0})  # fmt: skip
    loaded = attnviz.from_model(LlamaModel(config), tokenizer)
    tr = attnviz.trace(loaded, " ".join([TEXT] * (N // 10 + 10)), max_tokens=N)
    assert tr.n_tokens == N and tr.nbytes < 150e6, (tr.n_tokens, tr.nbytes)
    assert all(tr.facts(i).structure.causal and tr.facts(i).structure.nbytes == 0 for i in range(tr.n_layer))
    layer, key, rows = 3, 5000, np.array([4999, 5000, 9000, N - 1])
    window = (N - 128, N)
    col, part = tr.column(layer, key), tr.stages(layer, queries=window, keys=(N - 300, N - 100)).weights
    assert col.shape == (8, N) and (col[:, :key] == 0).all() and part.shape == (8, 128, 200)
    for h in (0, 5):
        q, k = (np.asarray(a, np.float64) for a in tr.vectors(layer, h))
        for r in (*rows, window[0] + 7):
            scores = q[r] @ k[: r + 1].T * tr.facts(layer).scale  # causal: keys 0..r
            weights = np.concatenate([_softmax(scores), np.zeros(N - r - 1)])
            assert abs(tr.lse(layer, h)[0, r] - logsumexp(scores)) < 1e-4
            if r >= key:
                assert abs(col[h, r] - weights[key]) < 1e-6
            if r >= window[0]:
                np.testing.assert_allclose(part[h, r - window[0]], weights[N - 300 : N - 100], rtol=0, atol=1e-6)
