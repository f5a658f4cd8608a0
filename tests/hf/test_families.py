"""Families with attention beyond q.k: encoder-decoders (three attentions), softcapping, sinks, position bias.
Each is compared with transformers' own eager attention loaded independently from the same folder."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import attnviz
from attnviz.hf import capture, recorder

SOURCE, TARGET = "the cat sat on the mat", "a dog ran away"


def _eager(folder, seq2seq: bool):
    from transformers import AutoModel, AutoModelForSeq2SeqLM

    cls = AutoModelForSeq2SeqLM if seq2seq else AutoModel
    return cls.from_pretrained(folder, attn_implementation="eager", dtype=torch.float32).eval()


def _stack(attentions) -> np.ndarray:
    return np.stack([a[0].float().numpy() for a in attentions])


@pytest.mark.parametrize("kind", ["t5", "bart"])
def test_encoder_decoder_gives_three_attentions_equal_to_eager(kind, family_dir):
    folder = family_dir(kind)
    loaded = attnviz.load_model(str(folder))
    assert loaded.is_seq2seq and loaded.layers_per_role == {"encoder": 2, "decoder": 2, "cross": 2}
    tr = attnviz.trace(loaded, SOURCE, target=TARGET)
    assert isinstance(tr, attnviz.Seq2SeqTrace)
    n_src, n_tgt = tr.encoder.n_tokens, tr.decoder.n_tokens
    assert tr.cross.weights.shape == (2, 4, n_tgt, n_src) and tr.cross.key_tokens == tr.encoder.tokens
    with torch.no_grad():
        ref = _eager(folder, True)(
            input_ids=torch.tensor([tr.encoder.provenance.input_ids]),
            decoder_input_ids=torch.tensor([tr.decoder.provenance.input_ids]),
            output_attentions=True,
        )
    for part, attentions in (("encoder", ref.encoder_attentions), ("decoder", ref.decoder_attentions),
                             ("cross", ref.cross_attentions)):  # fmt: skip
        np.testing.assert_allclose(tr.part(part).weights, _stack(attentions), rtol=0, atol=1e-5, err_msg=part)
    upper = np.triu(np.ones((n_tgt, n_tgt), bool), 1)
    assert (tr.decoder.weights[..., upper] == 0).all()  # the decoder is causal
    assert not tr.decoder.layer_mask(0)[upper].any() and tr.cross.layer_mask(0).all()


def test_t5_relative_position_bias_joins_the_scaled_stage(family_dir):
    tr = attnviz.trace(attnviz.load_model(str(family_dir("t5"))), SOURCE, target=TARGET).encoder
    assert tr.scale.tolist() == [1.0, 1.0]  # T5 does not scale q.k
    assert tr.has_bias
    stages = tr.layer(0)
    bias = tr.layers[0].bias.numpy()
    np.testing.assert_allclose(stages.scaled, stages.scores + bias, rtol=1e-6, atol=1e-6)


def test_the_target_is_teacher_forced_as_in_training(family_dir):
    loaded = attnviz.load_model(str(family_dir("bart")))
    tr = attnviz.trace(loaded, SOURCE, target=TARGET)
    labels = loaded.tokenizer(text_target=TARGET)["input_ids"]
    start = loaded.model.config.decoder_start_token_id
    assert list(tr.decoder.provenance.input_ids) == [start, *labels[:-1]]  # shifted right by one


def test_without_a_target_the_model_generates_one_greedily(family_dir):
    loaded = attnviz.load_model(str(family_dir("t5")))
    tr = attnviz.trace(loaded, SOURCE)
    with torch.no_grad():
        enc = loaded.tokenizer(SOURCE, return_tensors="pt")
        greedy = loaded.model.generate(**enc, max_new_tokens=48, do_sample=False)[0, :-1].tolist()
    assert list(tr.decoder.provenance.input_ids) == greedy
    assert any("generated greedily" in n for n in tr.notes)


def test_a_saved_encoder_half_loads_as_an_encoder(family_dir):
    loaded = attnviz.load_model(str(family_dir("t5", encoder_only=True)))
    assert not loaded.is_seq2seq and loaded.route == "seam"
    tr = attnviz.trace(loaded, SOURCE)
    assert isinstance(tr, attnviz.AttentionTrace) and tr.n_layer == 2


def test_experiments_on_an_encoder_decoder_without_a_part_are_refused_not_ignored(family_dir):
    loaded = attnviz.load_model(str(family_dir("bart")))
    with pytest.raises(attnviz.InputError, match="encoder-decoder"):
        attnviz.trace(loaded, SOURCE, target=TARGET, causal=True)


@pytest.mark.parametrize("kind", ["gemma2", "gpt_oss"])
def test_softcapping_and_sinks_are_captured_as_the_model_computes_them(kind, family_dir):
    folder = family_dir(kind)
    loaded = attnviz.load_model(str(folder))
    assert loaded.route == "seam" and (loaded.n_layer, loaded.n_head, loaded.d_head) == (2, 4, 8)
    tr = attnviz.trace(loaded, SOURCE)
    with torch.no_grad():
        ref = _eager(folder, False)(input_ids=torch.tensor([tr.provenance.input_ids]), output_attentions=True)
    np.testing.assert_allclose(tr.weights, _stack(ref.attentions), rtol=0, atol=1e-5)
    layer = tr.layer(0)
    if kind == "gemma2":  # scaled = 5 * tanh(scores * scale / 5): never beyond the cap
        assert tr.layers[0].softcap == 5.0 and np.abs(layer.scaled).max() <= 5.0
        np.testing.assert_allclose(layer.scaled, 5 * np.tanh(layer.scores * tr.scale[0] / 5), rtol=1e-5, atol=1e-6)
    else:  # each row's weights plus its sink's share sum to 1
        sinks = tr.layers[0].sinks.numpy()
        masked = np.where(tr.layer_mask(0), layer.masked, -np.inf)
        share = np.exp(sinks[:, None]) / (np.exp(masked).sum(-1) + np.exp(sinks[:, None]))
        np.testing.assert_allclose(layer.weights.sum(-1) + share, 1, rtol=1e-5)
        assert (share > 0.01).all()


def test_an_attention_argument_nobody_handles_refuses_the_capture():
    capture.check_arguments({"sliding_window": 4, "position_ids": torch.arange(3), "flag": None})  # known or empty
    with pytest.raises(recorder.CaptureRefused, match="mystery_bias"):
        capture.check_arguments({"mystery_bias": torch.zeros(2)})
