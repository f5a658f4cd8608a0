"""BERT-style own-code families read stage by stage (attnviz.hf.readers.bert): MegatronBERT, RemBERT, BigBird (full
attention), ConvBERT (its attention half), RoFormer (rotary), SqueezeBERT, I-BERT (float path), MPNet (relative
position bias), Nystromformer (its exact path) and GPT-NeoX-Japanese (partial rotary).

Each is compared with transformers' own eager attention (output_attentions=True) of a copy loaded independently from
the same folder, on a plain and a right-padded text. The scores are compared with q.k computed here in numpy from the
module's projection weights (rotary embeddings and MPNet's bucketed relative positions written out here too).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import attnviz
from attnviz.hf import readers
from attnviz.hf.readers import bert
from tests.hf import families as fm

FAMILIES = ["megatron-bert", "rembert", "big_bird", "convbert", "roformer", "squeezebert", "ibert", "mpnet",
            "nystromformer", "gpt_neox_japanese"]  # fmt: skip
CAUSAL = {"gpt_neox_japanese"}
TEXT = fm.TEXT
ATOL = 1e-5
ROTARY_NDIMS = 4  # GPT-NeoX-Japanese is built with half of each 8-wide head rotated


def _build(family, folder):
    if family != "gpt_neox_japanese":
        return fm.build(family, folder)
    from transformers import GPTNeoXJapaneseModel

    config = fm.tiny_config(family)
    config.rope_parameters = dict(config.rope_parameters, partial_rotary_factor=ROTARY_NDIMS / 8)
    torch.manual_seed(0)
    return fm.save(GPTNeoXJapaneseModel(config), folder)


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("own-bert")
    return {f: _build(f, root / f) for f in FAMILIES}


def _softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("pad", [0, 3])
def test_every_stage_equals_eager_attention(family, pad, folders):
    loaded, tr, n_real = fm.padded_trace(folders[family], pad)
    assert loaded.route == "readers" and loaded.note == ""
    assert tr.available_stages == attnviz.STAGES and tr.has("scores")
    assert "own attention code" in tr.provenance.attn_implementation
    ref = fm.eager_attentions(folders[family], list(tr.provenance.input_ids), n_real)
    if family == "squeezebert":  # its output_attentions is the masked stage: the weights are its softmax
        np.testing.assert_allclose(np.stack([tr.layer(i).masked for i in range(tr.n_layer)]), ref, rtol=0, atol=ATOL)
        ref = _softmax(ref.astype(np.float64))
    np.testing.assert_allclose(tr.weights, ref, rtol=0, atol=ATOL)
    n = tr.n_tokens
    allowed = np.tril(np.ones((n, n), bool)) if family in CAUSAL else np.ones((n, n), bool)
    allowed[:, n_real:] = False
    for layer in range(tr.n_layer):
        np.testing.assert_array_equal(tr.layer_mask(layer), allowed)
    np.testing.assert_allclose(tr.scale, 8**-0.5)
    assert set(tr.scale_on) == {"q and k" if family == "nystromformer" else "scores"}
    assert tr.n_head == (2 if family == "convbert" else 4)
    stages = tr.layer(1)
    if family != "mpnet":  # MPNet's position bias joins the scaled stage (tested below)
        np.testing.assert_allclose(stages.scaled, stages.scores * tr.scale[1], rtol=1e-6, atol=1e-6)
    assert (stages.masked[:, ~allowed] == np.float32(tr.fill[1])).all()
    np.testing.assert_array_equal(stages.masked[:, allowed], stages.scaled[:, allowed])


def _linear(x, lin):
    w = lin.weight.detach().double().numpy()
    if w.ndim == 3:  # SqueezeBERT: a grouped 1x1 convolution, a block-diagonal linear map of the channels
        groups, (out, width, _) = lin.groups, w.shape
        full = np.zeros((out, width * groups))
        for g in range(groups):
            rows = slice(g * out // groups, (g + 1) * out // groups)
            full[rows, g * width : (g + 1) * width] = w[rows, :, 0]
        w = full
    return x @ w.T + lin.bias.detach().double().numpy()


def _split(t, n_head):
    """[seq, head * d] -> [head, seq, d]."""
    return t.reshape(t.shape[0], n_head, -1).transpose(1, 0, 2)


def _rotate_pairs(x, positions):
    """RoFormer: feature pair (2i, 2i+1) turned by position / 10000^(2i / d), over the whole head."""
    d = x.shape[-1]
    angle = positions[:, None] / 10000 ** (np.arange(0, d, 2) / d)
    cos, sin = np.cos(angle), np.sin(angle)
    out = x.copy()
    out[..., 0::2] = x[..., 0::2] * cos - x[..., 1::2] * sin
    out[..., 1::2] = x[..., 1::2] * cos + x[..., 0::2] * sin
    return out


def _rotate_halves(x, positions, r, theta):
    """GPT-NeoX: features i and i + r/2 of the first r turned by position / theta^(2i / r); the rest pass through."""
    angle = positions[:, None] / theta ** (np.arange(0, r, 2) / r)
    cos, sin = np.cos(angle), np.sin(angle)
    out, h = x.copy(), r // 2
    out[..., :h] = x[..., :h] * cos - x[..., h:r] * sin
    out[..., h:r] = x[..., h:r] * cos + x[..., :h] * sin
    return out


def _q_k(family, module, x, config):
    """q, k [head, seq, d] as the family computes them, in numpy from the module's weights."""
    n = x.shape[0]
    if family == "gpt_neox_japanese":
        qkv = (x @ module.query_key_value.weight.detach().double().numpy().T).reshape(n, 4, 24).transpose(1, 0, 2)
        q, k = qkv[..., :8], qkv[..., 8:16]
        theta = config.rope_parameters["rope_theta"]
        return (_rotate_halves(t, np.arange(n, dtype=np.float64), ROTARY_NDIMS, theta) for t in (q, k))
    names = ("q", "k") if family == "mpnet" else ("query", "key")
    q, k = (_split(_linear(x, getattr(module, a)), 2 if family == "convbert" else 4) for a in names)
    if family == "roformer":
        q, k = (_rotate_pairs(t, np.arange(n, dtype=np.float64)) for t in (q, k))
    return q, k


@pytest.mark.parametrize("family", FAMILIES)
def test_scores_are_q_dot_k_from_the_modules_own_projections(family, folders):
    loaded = attnviz.load_model(str(folders[family]), device="cpu")
    tr = attnviz.trace(loaded, TEXT)
    x, _, _ = attnviz.attention_inputs(loaded, TEXT, 1)  # what layer 1's projections see, [seq, d_model]
    assert tuple(x.shape) == (tr.n_tokens, 32)
    q, k = _q_k(family, loaded.attention_modules[1], x.numpy().astype(np.float64), loaded.model.config)
    np.testing.assert_allclose(tr.layer(1).scores, q @ k.transpose(0, 2, 1), rtol=0, atol=ATOL)


def _relative_bucket(relative, num_buckets=32, max_distance=128):
    """MPNet's (T5's bidirectional) bucket of a relative position key - query, written out."""
    half = num_buckets // 2
    n = -relative
    ret = np.where(n < 0, half, 0)
    n = np.abs(n)
    exact = half // 2
    large = exact + (np.log(np.maximum(n, 1) / exact) / math.log(max_distance / exact) * (half - exact)).astype(int)
    return ret + np.where(n < exact, n, np.minimum(large, half - 1))


def test_mpnet_bias_is_its_relative_position_bias(folders):
    loaded = attnviz.load_model(str(folders["mpnet"]), device="cpu")
    tr = attnviz.trace(loaded, TEXT)
    n = tr.n_tokens
    assert n > 9  # distances of 8 and more fall in logarithmic buckets
    assert tr.has_bias
    pos = np.arange(n)
    buckets = _relative_bucket(pos[None, :] - pos[:, None])
    table = loaded.model.encoder.relative_attention_bias.weight.detach().numpy()  # [bucket, head]
    bias = table[buckets].transpose(2, 0, 1)  # [head, query, key]
    for layer in range(tr.n_layer):  # computed once, the same in every layer
        stages = tr.layer(layer)
        np.testing.assert_allclose(stages.scaled - stages.scores * tr.scale[layer], bias, rtol=0, atol=ATOL)


def test_ibert_integer_mode_is_weights_only_with_a_note(tmp_path):
    from transformers import IBertModel

    config = fm.tiny_config("ibert")
    config.quant_mode = True
    torch.manual_seed(0)
    IBertModel(config).save_pretrained(tmp_path)
    fm.tokenizer().save_pretrained(tmp_path)
    loaded = attnviz.load_model(str(tmp_path), device="cpu")
    assert loaded.route != "readers" and "integer-only mode" in loaded.note
    assert not attnviz.trace(loaded, TEXT).has("scores")


@pytest.mark.parametrize("family", ["roformer", "squeezebert", "convbert"])
def test_layers_our_module_cannot_copy_are_refused(family, folders):
    """Rotary q and k, 1x1 convolutions and half-width heads have no equivalent in our MultiHeadAttention."""
    loaded = attnviz.load_model(str(folders[family]), device="cpu")
    with pytest.raises(attnviz.InputError, match="is not supported"):
        attnviz.module_from_layer(loaded, 0)


def test_a_megatron_layer_copied_into_our_module_gives_its_weights(folders):
    loaded = attnviz.load_model(str(folders["megatron-bert"]), device="cpu")
    tr = attnviz.trace(loaded, TEXT)
    ours = attnviz.module_from_layer(loaded, 1)
    x, _, _ = attnviz.attention_inputs(loaded, TEXT, 1)
    with torch.no_grad():
        _, stages = ours(x)
    np.testing.assert_allclose(np.asarray(stages.weights), tr.layer(1).weights, rtol=0, atol=ATOL)


def test_squeezebert_weights_only_shows_the_softmax_of_what_eager_returns(folders, monkeypatch):
    """Should its reading fail the check at load, the weights-only trace still shows weights, not the masked scores
    SqueezeBERT's output_attentions gives."""
    key = "transformers.models.squeezebert.modeling_squeezebert.SqueezeBertSelfAttention"
    wrong = readers.Reader("SqueezeBERT", lambda m, a: bert.squeezebert(m, a)._replace(scale=1.0), "masked")
    monkeypatch.setitem(readers.READERS, key, wrong)
    loaded = attnviz.load_model(str(folders["squeezebert"]), device="cpu")
    assert loaded.route != "readers" and "did not match" in loaded.note
    n_real = attnviz.trace(loaded, TEXT).n_tokens
    tr = attnviz.trace(loaded, TEXT, pad_to=n_real + 3)
    assert not tr.has("scores")
    ref = _softmax(
        fm.eager_attentions(folders["squeezebert"], list(tr.provenance.input_ids), n_real).astype(np.float64)
    )
    np.testing.assert_allclose(tr.weights, ref, rtol=0, atol=ATOL)
    np.testing.assert_allclose(tr.weights.sum(-1), 1, atol=1e-5)


@pytest.mark.parametrize("family", ["roformer", "megatron-bert"])
def test_a_decoder_is_read_with_its_causal_mask(family, tmp_path):
    """is_decoder=True: the causal mask is part of the additive mask the model passes, and is read from it."""
    from attnviz.hf.load import model_class

    config = fm.tiny_config(family)
    config.is_decoder = True
    torch.manual_seed(0)
    model_class(config).from_config(config).save_pretrained(tmp_path)
    fm.tokenizer().save_pretrained(tmp_path)
    loaded = attnviz.load_model(str(tmp_path), device="cpu")
    assert loaded.route == "readers" and loaded.note == ""
    n_real = attnviz.trace(loaded, TEXT).n_tokens
    tr = attnviz.trace(loaded, TEXT, pad_to=n_real + 3)
    np.testing.assert_allclose(
        tr.weights, fm.eager_attentions(tmp_path, list(tr.provenance.input_ids), n_real), rtol=0, atol=ATOL
    )
    allowed = np.tril(np.ones((tr.n_tokens, tr.n_tokens), bool))
    allowed[:, n_real:] = False
    np.testing.assert_array_equal(tr.layer_mask(1), allowed)


@pytest.mark.parametrize("options", [dict(causal=True), dict(hide=[1]), dict(scale=1.0)])
def test_experiments_its_own_code_would_not_apply_are_refused(options, folders):
    loaded = attnviz.load_model(str(folders["mpnet"]), device="cpu")
    with pytest.raises(attnviz.InputError, match="cannot change its mask or scale"):
        attnviz.trace(loaded, TEXT, **options)


@pytest.fixture(scope="module")
def deberta_folder(tmp_path_factory):
    """DeBERTa with its disentangled position terms on (both kinds), relative embeddings large enough to matter."""
    from transformers import DebertaModel

    folder = tmp_path_factory.mktemp("deberta")
    config = fm.tiny_config("deberta")
    config.relative_attention, config.pos_att_type = True, ["c2p", "p2c"]
    torch.manual_seed(0)
    model = DebertaModel(config)
    with torch.no_grad():
        model.encoder.rel_embeddings.weight.normal_(0, 1)
        for name, p in model.named_parameters():
            if "pos_proj" in name or "pos_q_proj" in name:
                p.normal_(0, 0.5)
    return fm.save(model, folder)


@pytest.mark.parametrize("pad", [0, 3])
def test_deberta_disentangled_terms_are_the_bias_and_the_weights_equal_eager(deberta_folder, pad):
    loaded, tr, n_real = fm.padded_trace(deberta_folder, pad)
    assert loaded.route == "readers" and loaded.note == ""
    ref = fm.eager_attentions(deberta_folder, list(tr.provenance.input_ids), n_real)
    np.testing.assert_allclose(tr.weights, ref, rtol=0, atol=ATOL)
    np.testing.assert_allclose(tr.scale, (8 * 3) ** -0.5, rtol=1e-6)  # sqrt(d * (1 + two position terms))
    assert set(tr.scale_on) == {"q"} and tr.has_bias
    stages = tr.layer(1)
    bias = (stages.scaled - stages.scores * tr.scale[1])[:, :n_real, :n_real]
    assert np.abs(bias - bias.mean(-1, keepdims=True)).max() > 0.1  # varies along each row: the softmax sees it
    x, _, _ = attnviz.attention_inputs(loaded, TEXT, 1)
    module = loaded.attention_modules[1]
    qkv = x.double().numpy() @ module.in_proj.weight.detach().double().numpy().T  # per head: [q | k | v]
    qkv = qkv.reshape(x.shape[0], 4, 24).transpose(1, 0, 2)
    q = qkv[..., :8] + module.q_bias.detach().double().numpy().reshape(4, 1, 8)
    k = qkv[..., 8:16]
    np.testing.assert_allclose(attnviz.trace(loaded, TEXT).layer(1).scores, q @ k.transpose(0, 2, 1), atol=ATOL)
