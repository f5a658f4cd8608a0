"""Families that compute attention in their own code, read stage by stage (attnviz.hf.readers): BLOOM and MPT (ALiBi).

Each is compared with transformers' own eager attention (output_attentions=True) of a copy loaded independently
from the same folder, on a plain and a padded text; the ALiBi bias is compared with the slopes of the ALiBi paper
computed here, and the scores with q.k computed from the module's projection weights.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import attnviz
from attnviz.hf import readers
from attnviz.hf.readers import alibi
from tests.hf import families as fm

FAMILIES = ["bloom", "mpt"]
TEXT = fm.TEXT
ATOL = 1e-5


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("own")
    return {f: fm.build(f, root / f) for f in FAMILIES}


def _eager(folder):
    return fm.eager_model(folder)


def _reference(folder, ids, n_real):
    """Eager attentions [layer, head, query, key] and last hidden state for `ids`, keys from n_real on padding."""
    mask = torch.tensor([[1] * n_real + [0] * (len(ids) - n_real)])
    with torch.no_grad():
        out = _eager(folder)(
            input_ids=torch.tensor([ids]), attention_mask=mask, output_attentions=True, use_cache=False
        )
    return fm.stack_attentions(out.attentions), out.last_hidden_state[0]


def _slopes(n_head: int) -> np.ndarray:
    """ALiBi's head slopes for a power-of-two head count: 2^(-8 (h + 1) / n_head)."""
    return 2.0 ** (-8.0 * np.arange(1, n_head + 1) / n_head)


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("pad", [0, 4])
def test_every_stage_equals_eager_attention(family, pad, folders):
    loaded = attnviz.load_model(str(folders[family]), device="cpu")
    assert loaded.route == "readers" and loaded.note == ""
    plain = attnviz.trace(loaded, TEXT)
    n_real = plain.n_tokens
    tr = attnviz.trace(loaded, TEXT, pad_to=n_real + pad) if pad else plain
    assert tr.available_stages == attnviz.STAGES and tr.has("scores") and tr.has_bias
    assert "own attention code" in tr.provenance.attn_implementation
    ref, _ = _reference(folders[family], list(tr.provenance.input_ids), n_real)
    np.testing.assert_allclose(tr.weights, ref, rtol=0, atol=ATOL)
    n = tr.n_tokens
    causal = np.tril(np.ones((n, n), bool))
    causal[:, n_real:] = False
    assert (tr.mask == causal).all()  # causal, and padding keys hidden from every query
    np.testing.assert_allclose(tr.scale, 8**-0.5)


@pytest.mark.parametrize("family", FAMILIES)
def test_the_bias_is_alibi_and_the_scores_are_q_dot_k(family, folders):
    loaded = attnviz.load_model(str(folders[family]), device="cpu")
    tr = attnviz.trace(loaded, TEXT)
    n, layer = tr.n_tokens, tr.layer(1)
    keys = np.arange(n) if family == "bloom" else np.arange(n) - (n - 1)  # BLOOM: key position; MPT: minus the last
    alibi = _slopes(4)[:, None, None] * np.broadcast_to(keys, (n, n))
    np.testing.assert_allclose(layer.scaled - layer.scores * tr.scale[1], alibi, rtol=0, atol=ATOL)
    masked = ~tr.layer_mask(1)
    assert (layer.masked[:, masked] == tr.fill[1]).all()
    np.testing.assert_array_equal(layer.masked[:, ~masked], layer.scaled[:, ~masked])
    x, _, _ = attnviz.attention_inputs(loaded, TEXT, 1)  # what layer 1's projection sees
    module = loaded.attention_modules[1]
    w = (module.query_key_value if family == "bloom" else module.Wqkv).weight.detach()
    b = module.query_key_value.bias.detach() if family == "bloom" else torch.zeros(w.shape[0])
    qkv = (x @ w.T + b).view(n, 4, 3, 8) if family == "bloom" else (x @ w.T).view(n, 3, 4, 8).transpose(1, 2)
    q, k = qkv[:, :, 0].transpose(0, 1), qkv[:, :, 1].transpose(0, 1)
    np.testing.assert_allclose(layer.scores, (q @ k.transpose(-2, -1)).numpy(), rtol=0, atol=ATOL)


@pytest.mark.parametrize("family", FAMILIES)
def test_outputs_stay_the_eager_ones_and_padding_can_be_dropped(family, folders):
    loaded = attnviz.load_model(str(folders[family]), device="cpu")
    plain = attnviz.trace(loaded, TEXT)
    n_real = plain.n_tokens
    tr = attnviz.trace(loaded, TEXT, pad_to=n_real + 3, pad_mask=False)
    assert tr.mask[:, :, n_real:].any()  # padding keys visible again
    ids = list(tr.provenance.input_ids)
    ref, hidden = _reference(folders[family], ids, len(ids))
    np.testing.assert_allclose(tr.weights, ref, rtol=0, atol=ATOL)
    out = attnviz.hf.passes.forward(loaded.model, {"input_ids": torch.tensor([ids])}, attnviz.hf.recorder.Recorder())
    np.testing.assert_allclose(out.last_hidden_state[0], hidden, rtol=0, atol=1e-5)


@pytest.mark.parametrize(
    "options", [dict(causal=True), dict(hide=[1]), dict(scale=1.0), dict(fill=-1e4), dict(pad_mask=False, layers=[0])]
)
def test_experiments_its_own_code_would_not_apply_are_refused(options, folders):
    loaded = attnviz.load_model(str(folders["bloom"]), device="cpu")
    with pytest.raises(attnviz.InputError, match="cannot change its mask or scale"):
        attnviz.trace(loaded, TEXT, pad_to=16, **options)


def test_a_reading_that_disagrees_with_the_model_falls_back_to_weights_only(folders, monkeypatch):
    """The check at load is real: a reader that drops the ALiBi bias is caught, and no wrong stage is shown."""
    key = "transformers.models.bloom.modeling_bloom.BloomAttention"
    wrong = readers.Reader("BLOOM", lambda m, a: alibi.bloom(m, a)._replace(bias=None))
    monkeypatch.setitem(readers.READERS, key, wrong)
    loaded = attnviz.load_model(str(folders["bloom"]), device="cpu")
    assert loaded.route != "readers" and "did not match the model's own weights" in loaded.note
    tr = attnviz.trace(loaded, TEXT)
    assert not tr.has("scores") and any("did not match" in n for n in tr.notes)
    assert all(not getattr(m, "_forward_pre_hooks", None) for m in loaded.model.modules())  # hooks removed


def test_a_model_in_memory_is_read_too_and_hooked_once(folders):
    from transformers import AutoModel, AutoTokenizer

    model = AutoModel.from_pretrained(folders["mpt"], dtype=torch.float32)
    tok = AutoTokenizer.from_pretrained(folders["mpt"])
    first = attnviz.from_model(model, tok, "my mpt")
    again = attnviz.from_model(model, tok, "my mpt")
    assert first.route == again.route == "readers"
    tr = attnviz.trace(again, TEXT)
    assert tr.n_layer == 2  # one record per layer, not one per hook
    ref, _ = _reference(folders["mpt"], list(tr.provenance.input_ids), tr.n_tokens)
    np.testing.assert_allclose(tr.weights, ref, rtol=0, atol=ATOL)
