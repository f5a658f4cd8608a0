"""Value norms ||weight * v @ W_O[h]|| (Kobayashi et al. 2020) equal an independent computation from the model's own
weights: the hidden states entering each layer (transformers' output_hidden_states, through the family's
pre-attention layer norm), the value and output projections in numpy, times transformers' eager attention weights."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

import attnviz
from attnviz.analysis.values import value_norms, value_share
from attnviz.errors import InputError
from attnviz.trace import AttentionTrace

TEXT = "the cat sat on the mat because it was tired ."


def _np(t) -> np.ndarray:
    return t.detach().double().numpy()


def _bert(model, i: int, x: np.ndarray):
    """(v [head, key, d] from the layer's input, W_O [head, d, d_model]): BERT has no layer norm before attention."""
    att = model.encoder.layer[i].attention
    v = x @ _np(att.self.value.weight).T + _np(att.self.value.bias)
    return v, _np(att.output.dense.weight).T  # (in, out)


def _gpt2(model, i: int, x: np.ndarray):
    block = model.h[i]
    normed = _np(block.ln_1(torch.as_tensor(x, dtype=torch.float32)))  # GPT-2 norms before attention: ln_1
    d = x.shape[-1]
    v = normed @ _np(block.attn.c_attn.weight)[:, 2 * d :] + _np(block.attn.c_attn.bias)[2 * d :]  # Conv1D: (in, out)
    return v, _np(block.attn.c_proj.weight)


def _llama(model, i: int, x: np.ndarray):
    layer = model.layers[i]
    normed = _np(layer.input_layernorm(torch.as_tensor(x, dtype=torch.float32)))
    return normed @ _np(layer.self_attn.v_proj.weight).T, _np(layer.self_attn.o_proj.weight).T


FAMILIES = {"bert": _bert, "gpt2": _gpt2, "llama": _llama}


def reference(eager, family: str, ids, attention_mask, n_head: int, **extra):
    """([layer, head, query, key] value norms, [layer, head, key, d] values per query head), float64 from
    transformers' eager model, computed in numpy."""
    with torch.no_grad():
        out = eager(input_ids=torch.tensor([ids]), attention_mask=torch.tensor([attention_mask]),
                    output_attentions=True, output_hidden_states=True, **extra)  # fmt: skip
    layers, values = [], []
    for i, weights in enumerate(out.attentions):
        v, w_o = FAMILIES[family](eager, i, _np(out.hidden_states[i][0]))
        n_kv = v.shape[-1] * n_head // w_o.shape[0]  # value heads: the value width over the head width
        d = w_o.shape[0] // n_head
        v = v.reshape(len(ids), n_kv, d).transpose(1, 0, 2)  # [kv head, key, d]
        written = np.stack(
            [np.linalg.norm(v[h // (n_head // n_kv)] @ w_o[h * d : (h + 1) * d], axis=-1) for h in range(n_head)]
        )  # [head, key]
        layers.append(np.abs(_np(weights[0])) * written[:, None, :])
        values.append(v[np.arange(n_head) // (n_head // n_kv)])
    return np.stack(layers), np.stack(values)


@pytest.fixture(scope="module")
def models(bundled, tiny_gpt2, tiny_llama, bundled_eager, eager_copy, tiny_gpt2_dir, tiny_llama_dir):
    return {
        "bert": (bundled, bundled_eager),
        "gpt2": (tiny_gpt2, eager_copy(tiny_gpt2_dir)),
        "llama": (tiny_llama, eager_copy(tiny_llama_dir)),
    }


@pytest.mark.parametrize("family", ["bert", "gpt2", "llama"])
@pytest.mark.parametrize("pad", [0, 3])
def test_value_norms_equal_the_models_own_weights(models, family, pad):
    loaded, eager = models[family]
    tr = attnviz.trace(loaded, TEXT, pad_to=None if not pad else len(attnviz.trace(loaded, TEXT).tokens) + pad)
    ids = list(tr.provenance.input_ids)
    visible = [0 if pad and i >= len(ids) - pad else 1 for i in range(len(ids))]
    extra = {"token_type_ids": torch.zeros(1, len(ids), dtype=torch.long)} if family == "bert" else {}
    expected, values = reference(eager, family, ids, visible, tr.n_head, **extra)
    assert tr.has("values") and tr.why_not("values") is None
    for layer in range(tr.n_layer):
        for head in range(tr.n_head):  # the values themselves, value heads shared out as the model shares them
            np.testing.assert_allclose(tr.values(layer, head), values[layer, head], rtol=1e-4, atol=1e-5)
        got = value_norms(tr, layer)
        assert got.dtype == np.float32 and got.shape == expected[layer].shape
        np.testing.assert_allclose(got, expected[layer], rtol=2e-4, atol=1e-6, err_msg=f"{family} layer {layer}")
    if pad:  # padding keys are masked: nothing is taken from them
        assert np.all(value_norms(tr, 0)[..., -pad:] == 0)


def test_a_sentence_pair_equals_the_models_own_weights(bundled, bundled_eager):
    tr = attnviz.trace(bundled, "the cat sat on the mat", pair="it was tired because it ran", pad_to=20)
    ids = list(tr.provenance.input_ids)
    enc = bundled.tokenizer("the cat sat on the mat", "it was tired because it ran", split_special_tokens=True)
    n = len(enc["input_ids"])
    assert ids[:n] == enc["input_ids"] and len(ids) == 20
    types = torch.tensor([enc["token_type_ids"] + [0] * (20 - n)])
    expected, _ = reference(bundled_eager, "bert", ids, [1] * n + [0] * (20 - n), tr.n_head, token_type_ids=types)
    np.testing.assert_allclose(value_norms(tr, 4), expected[4], rtol=2e-4, atol=1e-6)
    share = value_share(tr, 4)
    np.testing.assert_allclose(share.sum(-1), 1.0, atol=1e-5)
    assert np.all(share[..., n:] == 0)  # padding takes no share


def test_value_share_rows_sum_to_one_and_windows_are_parts_of_the_whole(tiny_llama):
    tr = attnviz.trace(tiny_llama, TEXT)
    share, norms = value_share(tr, 1), value_norms(tr, 1)
    np.testing.assert_allclose(share.sum(-1), 1.0, atol=1e-5)
    assert np.all(share[:, 0, 1:] == 0)  # causal: the first query sees only itself
    # a window is the same cells of the whole layer: heads, queries and keys cut apart
    np.testing.assert_allclose(value_norms(tr, 1, heads=[3, 1], queries=(2, 7), keys=(1, 5)),
                               norms[[3, 1], 2:7, 1:5], rtol=1e-5, atol=1e-7)  # fmt: skip
    np.testing.assert_allclose(value_share(tr, 1, heads=2, queries=(4, 9), keys=(0, 3)), share[2:3, 4:9, :3],
                               rtol=1e-5, atol=1e-7)  # fmt: skip
    # a sink-like key: a large weight on a tiny value loses its share
    w = tr.stages(1).weights
    small = np.argmin(tr.output_norms(1), axis=-1)  # per head, the key that writes least
    for h, j in enumerate(small):
        rows = slice(j, None)  # queries that may see key j
        assert np.all(share[h, rows, j] <= w[h, rows, j] + 1e-6)


def test_our_module_value_norms_equal_its_own_projections(bundled):
    src = attnviz.ModuleSource(bundled, d_model=48, n_head=4, inputs="random")
    tr = attnviz.trace(src, "the cat sat on the mat")
    module = src.build()
    x, _, _ = attnviz.module.tracing.input_vectors(src, "the cat sat on the mat")
    v = (_np(x) @ _np(module.w_v.weight).T + _np(module.w_v.bias)).reshape(-1, 4, 12).transpose(1, 0, 2)
    w_o = _np(module.w_o.weight).T  # (in, out)
    written = np.stack([np.linalg.norm(v[h] @ w_o[h * 12 : (h + 1) * 12], axis=-1) for h in range(4)])
    with torch.inference_mode():
        _, stages = module(x)
    np.testing.assert_allclose(value_norms(tr, 0), _np(stages.weights) * written[:, None, :], rtol=2e-4, atol=1e-6)


def test_a_family_read_from_its_own_code_has_stages_but_says_why_it_has_no_values(tiny_deberta_dir):
    tr = attnviz.trace(attnviz.load_model(str(tiny_deberta_dir)), TEXT)
    assert tr.has("scores") and not tr.has("values")
    assert "own attention code" in tr.why_not("values") and "values" in tr.why_not("values")
    with pytest.raises(InputError, match="own attention code"):
        value_share(tr, 0)


def test_weights_only_traces_say_why_in_words(tiny_xlnet_dir, bundled):
    given = AttentionTrace.from_weights(["a", "b"], np.full((1, 2, 2, 2), 0.5, np.float32))
    assert not given.has("values") and "value vectors" in given.why_not("values")
    with pytest.raises(InputError, match="value vectors"):
        value_norms(given, 0)
    xlnet = attnviz.trace(attnviz.load_model(str(tiny_xlnet_dir)), TEXT)
    assert not xlnet.has("scores") and not xlnet.has("values")
    assert "own code" in xlnet.why_not("values")
    saved = AttentionTrace.from_scores(["a", "b"], np.zeros((1, 1, 2, 2)), 1.0)
    assert "stage arrays" in saved.why_not("values")


@pytest.mark.parametrize("kind", ["t5", "bart"])
def test_cross_attention_writes_the_encoders_values(tmp_path, kind):
    from tiny_families import build
    from transformers import AutoModelForSeq2SeqLM

    folder = build(kind, tmp_path)
    loaded = attnviz.load_model(str(folder))
    tr = attnviz.trace(loaded, "the cat sat on the mat", target="a dog ran away")
    eager = AutoModelForSeq2SeqLM.from_pretrained(str(folder), attn_implementation="eager").eval()
    with torch.no_grad():
        out = eager(input_ids=torch.tensor([tr.encoder.provenance.input_ids]),
                    decoder_input_ids=torch.tensor([tr.cross.provenance.input_ids]), output_attentions=True)  # fmt: skip
    source = _np(out.encoder_last_hidden_state[0])
    for i, weights in enumerate(out.cross_attentions):
        layer = (
            eager.decoder.block[i].layer[1].EncDecAttention
            if kind == "t5"
            else eager.model.decoder.layers[i].encoder_attn
        )
        v_proj, o_proj = (layer.v, layer.o) if kind == "t5" else (layer.v_proj, layer.out_proj)
        v = source @ _np(v_proj.weight).T + (0 if v_proj.bias is None else _np(v_proj.bias))
        v, w_o = v.reshape(len(source), 4, 8).transpose(1, 0, 2), _np(o_proj.weight).T
        written = np.stack([np.linalg.norm(v[h] @ w_o[h * 8 : (h + 1) * 8], axis=-1) for h in range(4)])
        np.testing.assert_allclose(
            value_norms(tr.cross, i), _np(weights[0]) * written[:, None, :], rtol=2e-4, atol=1e-6
        )
    assert tr.encoder.has("values") and tr.decoder.has("values")


def _without_values(tr: AttentionTrace) -> AttentionTrace:
    layers = tuple(dataclasses.replace(r, values=None) for r in tr.layers)
    return dataclasses.replace(tr, layers=layers)


def test_values_cost_at_most_six_tenths_more_memory(bundled):
    tr = attnviz.trace(bundled, " ".join(["the cat sat on the mat because it was tired ."] * 60), max_tokens=512)
    assert tr.n_tokens == 512 and tr.has("values")
    bare = _without_values(tr)
    assert not bare.has("values")
    assert tr.nbytes <= 1.6 * bare.nbytes, (tr.nbytes, bare.nbytes)
    assert tr.nbytes > bare.nbytes  # the values are counted
