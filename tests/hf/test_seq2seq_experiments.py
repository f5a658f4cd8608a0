"""Experiments on one attention of an encoder-decoder model (tiny random T5 and BART), inside the forward pass.

Weights are compared with a numpy softmax of the recorded scaled stage under the expected mask, earlier layers with
a run without the experiment, and the model's output with the logits of that run (read with a forward hook).
"""

from __future__ import annotations

import numpy as np
import pytest
from oracle import np_softmax

import attnviz

SOURCE, TARGET = "the cat sat on the mat", "a dog ran away"
CALL_ORDER = [("encoder", 0), ("encoder", 1), ("decoder", 0), ("cross", 0), ("decoder", 1), ("cross", 1)]


@pytest.fixture(scope="module", params=["t5", "bart"])
def loaded(request, family_dir):
    return attnviz.load_model(str(family_dir(request.param)))


def traced(loaded, **options):
    """(trace, logits [target, vocab]) of one forward pass."""
    seen = []
    handle = loaded.model.register_forward_hook(lambda m, a, out: seen.append(out.logits[0].float().numpy().copy()))
    try:
        tr = attnviz.trace(loaded, SOURCE, target=TARGET, **options)
    finally:
        handle.remove()
    return tr, seen[-1]


def test_causal_on_the_encoder_is_a_numpy_softmax_of_the_scaled_stage_under_a_causal_mask(loaded):
    tr, _ = traced(loaded, part="encoder", causal=True)
    n = tr.encoder.n_tokens
    below = np.tril(np.ones((n, n), bool))
    for i in range(tr.encoder.n_layer):
        stages = tr.encoder.layer(i)
        assert (stages.weights[..., ~below] == 0).all()
        expected = np_softmax(np.where(below, stages.scaled.astype(np.float64), -np.inf))
        np.testing.assert_allclose(stages.weights, expected, rtol=0, atol=1e-6)
        assert (tr.encoder.layer_mask(i) == below).all()
    assert ("causal", True) in tr.encoder.provenance.options


def test_a_source_token_hidden_from_cross_attention_gets_no_weight_in_any_cross_layer(loaded):
    tr, _ = traced(loaded, part="cross", hide=(2,))
    base, _ = traced(loaded)
    assert tr.cross.n_keys == tr.encoder.n_tokens
    for i in range(tr.cross.n_layer):
        w = tr.cross.layer(i).weights
        assert (w[..., 2] == 0).all() and (base.cross.layer(i).weights[..., 2] > 0).all()
        np.testing.assert_allclose(w.sum(-1), 1, rtol=0, atol=1e-6)
        expected = np_softmax(
            np.where(np.arange(tr.cross.n_keys) != 2, tr.cross.layer(i).scaled.astype(float), -np.inf)
        )
        np.testing.assert_allclose(w, expected, rtol=0, atol=1e-6)
    for i in range(2):  # the encoder runs before any cross-attention: untouched
        np.testing.assert_array_equal(tr.encoder.layer(i).weights, base.encoder.layer(i).weights)


@pytest.mark.parametrize(
    "part, options",
    [("encoder", dict(causal=True)), ("decoder", dict(hide=(1,))), ("cross", dict(hide=(0, 3))),
     ("cross", dict(scale=0.01)), ("encoder", dict(hide=(1,), fill=-1e9))],
)  # fmt: skip
def test_an_experiment_on_one_layer_leaves_earlier_calls_alone_and_changes_the_output(loaded, part, options):
    base, base_logits = traced(loaded)
    tr, logits = traced(loaded, part=part, layers=(1,), **options)
    first = CALL_ORDER.index((part, 1))
    for role, i in CALL_ORDER[:first]:  # every attention call before the experiment is exactly as without it
        np.testing.assert_array_equal(tr.part(role).layer(i).weights, base.part(role).layer(i).weights)
    changed = tr.part(part).layer(1).weights
    assert np.abs(changed - base.part(part).layer(1).weights).max() > 1e-3
    # it reached the model's output: a second run without it gives the very same logits, this one does not
    # (a tiny random model passes small changes on: BART's logits move by about 1e-5)
    np.testing.assert_array_equal(traced(loaded)[1], base_logits)
    assert np.abs(logits - base_logits).max() > 1e-6


def test_an_encoder_experiment_reaches_the_cross_attention_keys(loaded):
    base, _ = traced(loaded)
    tr, _ = traced(loaded, part="encoder", causal=True)
    for i in range(2):  # cross-attention keys are projections of the encoder's (changed) output
        assert not np.allclose(tr.cross.layers[i].k.numpy(), base.cross.layers[i].k.numpy(), atol=1e-5)
        np.testing.assert_allclose(tr.cross.layer(i).weights.sum(-1), 1, rtol=0, atol=1e-6)


def test_the_decoder_hides_target_positions_and_checks_them_against_the_target(loaded):
    tr, _ = traced(loaded, part="decoder", hide=(1,))
    assert (tr.decoder.weights[..., 1] == 0).all()
    n_tgt = tr.decoder.n_tokens
    with pytest.raises(attnviz.InputError, match="hide names token positions"):
        attnviz.trace(loaded, SOURCE, target=TARGET, part="decoder", hide=(n_tgt,))


def test_an_experiment_without_a_part_or_with_an_unknown_one_is_refused(loaded):
    with pytest.raises(attnviz.InputError, match="part="):
        attnviz.trace(loaded, SOURCE, target=TARGET, hide=(1,))
    with pytest.raises(attnviz.InputError, match="part must be one of"):
        attnviz.trace(loaded, SOURCE, target=TARGET, part="middle", causal=True)
    with pytest.raises(attnviz.InputError, match="do not exist"):
        attnviz.trace(loaded, SOURCE, target=TARGET, part="cross", layers=(5,), causal=True)


def test_values_false_leaves_the_values_out_of_every_part_and_nothing_else(loaded):
    kept, off = attnviz.trace(loaded, SOURCE, target=TARGET), attnviz.trace(loaded, SOURCE, target=TARGET, values=False)
    for role in ("encoder", "decoder", "cross"):
        assert kept.part(role).has("values") and "values=False" in off.part(role).why_not("values")
        np.testing.assert_array_equal(off.part(role).weights, kept.part(role).weights)
