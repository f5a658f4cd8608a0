"""Falcon (rotary or ALiBi; multi-query, grouped or per-head keys) and DeBERTa-v2 / v3 (disentangled attention with
log-bucketed relative positions) read stage by stage from their own attention code (attnviz.hf.readers: alibi, deberta).

Each variant is compared with transformers' own eager attention (output_attentions=True) of a copy loaded
independently from the same folder, on a plain and a right-padded text. The scores are compared with q.k computed
here in numpy from the module's projection weights (Falcon's rotary embedding and each layout's head split written
out here), Falcon's ALiBi bias with the slopes of the ALiBi paper, and DeBERTa's position terms with content-to-
position and position-to-content products computed here from the relative embeddings and the log buckets.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import attnviz
from attnviz.analysis.scale_site import scale_site
from attnviz.hf import readers, recorder
from attnviz.hf.readers import alibi, deberta
from tests.hf import families as fm

TEXT = fm.TEXT
ATOL = 1e-5
D_HEAD = 8

#: Falcon layouts: config changes and how many key heads the module keeps.
FALCON = {
    "falcon-rotary-multi-query": (dict(), 1),  # the default config: rotary, one key head for every query head
    "falcon-rotary-per-head": (dict(multi_query=False, num_kv_heads=4), 4),
    "falcon-alibi": (dict(alibi=True, multi_query=False, num_kv_heads=4), 4),
    "falcon-alibi-multi-query": (dict(alibi=True), 1),
    "falcon-grouped": (dict(new_decoder_architecture=True, num_kv_heads=2), 2),  # two query heads per key head
    "falcon-alibi-grouped": (dict(alibi=True, new_decoder_architecture=True, num_kv_heads=2), 2),
}
V3 = dict(relative_attention=True, pos_att_type=["p2c", "c2p"], position_buckets=256, share_att_key=True,
          norm_rel_ebd="layer_norm")  # fmt: skip
#: DeBERTa-v2 configs: the default (no position terms), microsoft/deberta-v3-base's attention settings, the same
#: with 8 buckets and separate position projections, so that distances of 5 and more share logarithmic buckets, and
#: content-to-position alone over unbucketed relative positions.
DEBERTA = {
    "deberta-v2": dict(),
    "deberta-v3": V3,
    "deberta-v3-few-buckets": dict(V3, position_buckets=8, max_relative_positions=32, share_att_key=False),
    "deberta-v2-c2p": dict(relative_attention=True, pos_att_type=["c2p"]),
}
ALIBI = [name for name, (changes, _) in FALCON.items() if changes.get("alibi")]
POSITION_TERMS = [name for name, changes in DEBERTA.items() if changes.get("pos_att_type")]
VARIANTS = [*FALCON, *DEBERTA]


def _build(name, folder):
    from transformers import DebertaV2Model, FalconModel

    falcon = name in FALCON
    config = fm.tiny_config("falcon" if falcon else "deberta-v2")
    for key, value in (FALCON[name][0] if falcon else DEBERTA[name]).items():
        setattr(config, key, value)
    torch.manual_seed(0)
    model = (FalconModel if falcon else DebertaV2Model)(config)
    with torch.no_grad():  # projections large enough that q.k and the position terms move the weights
        for key, p in model.named_parameters():
            if any(part in key for part in ("proj", "rel_embeddings", "query_key_value")):
                p.normal_(0, 0.3)
    return fm.save(model, folder)


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("own-falcon-deberta")
    return {name: _build(name, root / name) for name in VARIANTS}


def _allowed(name, n, n_real):
    """Falcon: causal, padding keys hidden. DeBERTa: every real token sees every real token; padded rows see none."""
    if name in FALCON:
        allowed = np.tril(np.ones((n, n), bool))
        allowed[:, n_real:] = False
        return allowed
    real = np.arange(n) < n_real
    return real[:, None] & real[None, :]


def _factor(name):
    return 1 + len(DEBERTA.get(name, {}).get("pos_att_type", []))


@pytest.mark.parametrize("name", VARIANTS)
@pytest.mark.parametrize("pad", [0, 3])
def test_every_stage_equals_eager_attention(name, pad, folders):
    loaded, tr, n_real = fm.padded_trace(folders[name], pad)
    assert loaded.route == "readers" and loaded.note == ""
    assert tr.available_stages == attnviz.STAGES and tr.has("scores")
    assert "own attention code" in tr.provenance.attn_implementation
    ref = fm.eager_attentions(folders[name], list(tr.provenance.input_ids), n_real)
    np.testing.assert_allclose(tr.weights, ref, rtol=0, atol=ATOL)
    allowed = _allowed(name, tr.n_tokens, n_real)
    assert tr.n_head == 4
    for layer in range(tr.n_layer):
        np.testing.assert_array_equal(tr.layer_mask(layer), allowed)
        stages = tr.layer(layer)
        assert (stages.masked[:, ~allowed] == np.float32(tr.fill[layer])).all()
        np.testing.assert_array_equal(stages.masked[:, allowed], stages.scaled[:, allowed])
    np.testing.assert_allclose(tr.scale, (D_HEAD * _factor(name)) ** -0.5, rtol=1e-6)
    assert set(tr.scale_on) == {"scores" if name in FALCON else "k"}
    assert tr.has_bias == (name in ALIBI + POSITION_TERMS)
    if name in FALCON:  # the key heads as the module keeps them (expanded per query head only for the stages)
        assert {r.k.shape[0] for r in tr.layers} == {FALCON[name][1]}


# --- q.k from the module's own projection weights ------------------------------------------------------------


def _rotate_halves(x, theta):
    """Falcon's rotary embedding: features i and i + d/2 turned by position / theta^(2i / d), over the whole head."""
    n, d = x.shape[-2], x.shape[-1]
    angle = np.arange(n, dtype=np.float64)[:, None] / theta ** (np.arange(0, d, 2) / d)
    cos, sin, h = np.cos(angle), np.sin(angle), d // 2
    out = x.copy()
    out[..., :h] = x[..., :h] * cos - x[..., h:] * sin
    out[..., h:] = x[..., h:] * cos + x[..., :h] * sin
    return out


def _falcon_q_k(name, module, x, config):
    """q, k [head, seq, d] (k repeated for the query heads it serves) from Falcon's fused projection, per layout."""
    n = x.shape[0]
    fused = x @ module.query_key_value.weight.detach().double().numpy().T  # the tiny config has no projection bias
    kv = FALCON[name][1]
    if config.new_decoder_architecture:  # per key head: [2 query heads, k, v]
        groups = fused.reshape(n, kv, 4, D_HEAD)
        q, k = groups[:, :, :2].reshape(n, 4, D_HEAD), np.repeat(groups[:, :, 2], 2, axis=1)
    elif config.multi_query:  # [4 query heads, k, v]
        heads = fused.reshape(n, 6, D_HEAD)
        q, k = heads[:, :4], np.repeat(heads[:, 4:5], 4, axis=1)
    else:  # per head [q, k, v]
        heads = fused.reshape(n, 4, 3, D_HEAD)
        q, k = heads[:, :, 0], heads[:, :, 1]
    q, k = q.transpose(1, 0, 2), k.transpose(1, 0, 2)
    if not config.alibi:
        q, k = (_rotate_halves(t, config.rope_parameters["rope_theta"]) for t in (q, k))
    return q, k


def _deberta_q_k(module, x):
    q, k = (x @ _w(p).T + _b(p) for p in (module.query_proj, module.key_proj))
    return (t.reshape(x.shape[0], 4, D_HEAD).transpose(1, 0, 2) for t in (q, k))


def _w(linear):
    return linear.weight.detach().double().numpy()


def _b(linear):
    return linear.bias.detach().double().numpy()


@pytest.mark.parametrize("name", VARIANTS)
def test_scores_are_q_dot_k_from_the_modules_own_projections(name, folders):
    loaded = attnviz.load_model(str(folders[name]), device="cpu")
    tr = attnviz.trace(loaded, TEXT)
    x, _, _ = attnviz.attention_inputs(loaded, TEXT, 1)  # what layer 1's projections see, [seq, d_model]
    x, module = x.numpy().astype(np.float64), loaded.attention_modules[1]
    if name in FALCON:
        q, k = _falcon_q_k(name, module, x, loaded.model.config)
    else:
        q, k = _deberta_q_k(module, x)
    np.testing.assert_allclose(tr.layer(1).scores, q @ k.transpose(0, 2, 1), rtol=0, atol=ATOL)


# --- the position terms -----------------------------------------------------------------------------------


def _slopes(n_head: int) -> np.ndarray:
    """ALiBi's head slopes for a power-of-two head count: 2^(-8 (h + 1) / n_head)."""
    return 2.0 ** (-8.0 * np.arange(1, n_head + 1) / n_head)


@pytest.mark.parametrize("name", ALIBI)
@pytest.mark.parametrize("pad", [0, 3])
def test_falcon_alibi_is_added_twice_as_the_model_adds_it(name, pad, folders):
    """(q.k + alibi) / sqrt(d) + a mask that holds alibi / sqrt(d) on visible cells: 2 x slope x key position / sqrt(d)
    between the scaled q.k and the scaled stage, wherever a query may look."""
    loaded = attnviz.load_model(str(folders[name]), device="cpu")
    n_real = attnviz.trace(loaded, TEXT).n_tokens
    tr = attnviz.trace(loaded, TEXT, pad_to=n_real + pad)
    n = tr.n_tokens
    allowed = _allowed(name, n, n_real)
    alibi = 2 * _slopes(4)[:, None, None] * np.broadcast_to(np.arange(n), (n, n)) / math.sqrt(D_HEAD)
    for layer in range(tr.n_layer):
        stages = tr.layer(layer)
        bias = stages.scaled - stages.scores * tr.scale[layer]
        np.testing.assert_allclose(bias[:, allowed], alibi[:, allowed], rtol=0, atol=ATOL)


def _log_bucket(relative, buckets, max_position):
    """DeBERTa-v2's relative position bucket: exact within buckets / 2, then logarithmic up to max_position."""
    mid = buckets // 2
    far = np.abs(relative) > mid
    distance = np.where(far, np.abs(relative), mid)
    log = np.ceil(np.log(distance / mid) / np.log((max_position - 1) / mid) * (mid - 1)) + mid
    return np.where(far, np.sign(relative) * log, relative).astype(int)


def _layer_norm(x, ln, eps):
    x = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + eps)
    return x * ln.weight.detach().double().numpy() + ln.bias.detach().double().numpy()


def _position_terms(name, loaded, x, n):
    """c2p[h, i, j] = q_i . pos_k(r) and p2c[h, i, j] = k_j . pos_q(r), r = the bucket of i - j (the distance itself
    without buckets) offset by the span, each / sqrt(d (1 + number of terms)), the terms the config turns on."""
    config, module, encoder = loaded.model.config, loaded.attention_modules[1], loaded.model.encoder
    furthest = config.max_relative_positions if config.max_relative_positions >= 1 else config.max_position_embeddings
    buckets = getattr(config, "position_buckets", -1)  # a config without it has none
    span = buckets if buckets > 0 else furthest
    rel = encoder.rel_embeddings.weight.detach().double().numpy()
    if "layer_norm" in getattr(config, "norm_rel_ebd", "none"):
        rel = _layer_norm(rel, encoder.LayerNorm, config.layer_norm_eps)
    shared = getattr(config, "share_att_key", False)
    terms, q, k = config.pos_att_type, *_deberta_q_k(module, x)
    pos = np.arange(n)
    distance = pos[:, None] - pos[None, :]
    if buckets > 0:
        distance = _log_bucket(distance, span, furthest)
    index = np.clip(distance + span, 0, 2 * span - 1)
    total = np.zeros((4, n, n))
    if "c2p" in terms:
        pos_k = _position_heads(rel, module.key_proj if shared else module.pos_key_proj)
        total += np.take_along_axis(q @ pos_k.transpose(0, 2, 1), np.broadcast_to(index, (4, n, n)), axis=-1)
    if "p2c" in terms:
        pos_q = _position_heads(rel, module.query_proj if shared else module.pos_query_proj)
        total += np.einsum("hjd,hijd->hij", k, pos_q[:, index])
    return total / math.sqrt(D_HEAD * (1 + len(terms)))


def _position_heads(rel, linear):
    """The relative embeddings through a projection, split into heads: [head, relative position, d]."""
    return (rel @ _w(linear).T + _b(linear)).reshape(-1, 4, D_HEAD).transpose(1, 0, 2)


@pytest.mark.parametrize("name", POSITION_TERMS)
def test_deberta_position_terms_are_the_bias(name, folders):
    loaded = attnviz.load_model(str(folders[name]), device="cpu")
    tr = attnviz.trace(loaded, TEXT)
    x, _, _ = attnviz.attention_inputs(loaded, TEXT, 1)
    stages = tr.layer(1)
    bias = stages.scaled - stages.scores * tr.scale[1]
    assert np.abs(bias - bias.mean(-1, keepdims=True)).max() > 0.1  # varies along each row: the softmax sees it
    expected = _position_terms(name, loaded, x.numpy().astype(np.float64), tr.n_tokens)
    np.testing.assert_allclose(bias, expected, rtol=0, atol=ATOL)


def test_few_buckets_share_far_distances():
    """The independent bucket function really buckets: 8 buckets, positions up to 32."""
    assert list(_log_bucket(np.arange(11), 8, 32)) == [0, 1, 2, 3, 4, 5, 5, 5, 6, 6, 6]


# --- what these families refuse ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["falcon-rotary-multi-query", "falcon-alibi", "deberta-v3"])
@pytest.mark.parametrize(
    "options", [dict(causal=True), dict(hide=[1]), dict(scale=1.0), dict(fill=-1e4), dict(pad_mask=False, layers=[0])]
)
def test_experiments_its_own_code_would_not_apply_are_refused(name, options, folders):
    loaded = attnviz.load_model(str(folders[name]), device="cpu")
    with pytest.raises(attnviz.InputError, match="cannot change its mask or scale"):
        attnviz.trace(loaded, TEXT, pad_to=16, **options)


@pytest.mark.parametrize("name", ["falcon-grouped", "deberta-v3"])
def test_their_layers_cannot_be_copied_into_our_module(name, folders):
    """Falcon's fused projection with shared keys and rotary q, k, DeBERTa's position terms: no equivalent there."""
    loaded = attnviz.load_model(str(folders[name]), device="cpu")
    with pytest.raises(attnviz.InputError, match="is not supported"):
        attnviz.module_from_layer(loaded, 0)


def test_a_falcon_reading_without_the_masks_second_alibi_falls_back_to_weights_only(folders, monkeypatch):
    """The check at load is real: a reader that keeps only alibi * inv_norm_factor (dropping what the mask adds)
    is caught, and no wrong stage is shown."""
    key = "transformers.models.falcon.modeling_falcon.FalconAttention"

    def single_alibi(module, a):
        call = alibi.falcon(module, a)
        single = a["alibi"].view(call.q.shape[0], 4, 1, -1) * module.inv_norm_factor
        return call._replace(bias=single)

    monkeypatch.setitem(readers.READERS, key, readers.Reader("Falcon", single_alibi))
    loaded = attnviz.load_model(str(folders["falcon-alibi"]), device="cpu")
    assert loaded.route != "readers" and "did not match the model's own weights" in loaded.note
    assert not attnviz.trace(loaded, TEXT).has("scores")


def test_deberta_v2_says_it_scales_k(folders):
    tr = attnviz.trace(attnviz.load_model(str(folders["deberta-v3"]), device="cpu"), TEXT)
    assert "multiplies k by the scale (0.2041) before the dot product" in scale_site(tr, 0)


def test_deberta_v2_separate_query_states_are_refused(folders):
    """The enhanced mask decoder passes query states of its own: not a reading of the layer's self-attention."""
    loaded = attnviz.load_model(str(folders["deberta-v3"]), device="cpu")
    module, x = loaded.attention_modules[0], torch.zeros(1, 3, 32)
    with pytest.raises(recorder.CaptureRefused, match="enhanced mask decoder"):
        deberta.deberta_v2(module, dict(hidden_states=x, attention_mask=torch.ones(1, 1, 3, 3), query_states=x))
