"""Encoder-decoder models on the dashboard: a target text, and the encoder, decoder and cross attentions."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import array, figures, run_page

import attnviz

SOURCE, TARGET = "the cat sat on the mat", "a dog ran away"


@pytest.mark.parametrize("kind", ["t5", "bart"])
@pytest.mark.parametrize("part", ["encoder", "decoder", "cross"])
def test_heads_page_shows_each_attention_of_an_encoder_decoder(kind, part, family_dir):
    folder = str(family_dir(kind))
    at = run_page("app_pages/heads.py", text=SOURCE, source="hub", model=folder, target=TARGET, part=part, layer=1)
    assert not at.exception and not at.error
    expected = attnviz.trace(attnviz.load_model(folder), SOURCE, target=TARGET).part(part)
    detail = figures(at)["head_detail"]["data"][0]
    z = array(detail["z"])
    assert z.shape == (expected.n_tokens, expected.n_keys)  # cross: target queries x source keys
    np.testing.assert_allclose(z, expected.layer(1).weights[0], atol=1e-6)


def _masks_page(kind, family_dir, part, **widgets):
    at = run_page("app_pages/masks.py", text=SOURCE, source="hub", model=str(family_dir(kind)), target=TARGET,
                  part=part, layer=1)  # fmt: skip
    assert not at.exception, [e.value for e in at.exception]
    kinds = {"causal": at.toggle, "hide": at.multiselect, "apply": at.radio, "fill": at.radio}
    for key, value in widgets.items():
        kinds[key](key=key).set_value(value)
    at.run()
    assert not at.exception and not at.error, [e.value for e in (*at.exception, *at.error)]
    return at


def _heatmap(at, figure: str, name: str) -> np.ndarray:
    return array(next(t for t in figures(at)[figure]["data"] if t.get("name") == name)["z"])


def test_masks_page_hides_a_source_token_from_cross_attention_in_every_layer(family_dir):
    at = _masks_page("bart", family_dir, "cross", causal=False, hide=[2], apply="all")
    loaded = attnviz.load_model(str(family_dir("bart")))
    expected = attnviz.trace(loaded, SOURCE, target=TARGET, part="cross", hide=(2,)).cross
    plain = attnviz.trace(loaded, SOURCE, target=TARGET).cross
    w = _heatmap(at, "mask_weights", "with")
    assert w.shape == (expected.n_tokens, expected.n_keys)  # target queries x source keys
    np.testing.assert_allclose(w, expected.layer(1).weights[0], atol=1e-6)
    np.testing.assert_allclose(_heatmap(at, "mask_weights", "without"), plain.layer(1).weights[0], atol=1e-6)
    assert (w[:, 2] == 0).all() and (plain.layer(1).weights[0][:, 2] > 0).all()
    assert np.isnan(_heatmap(at, "mask_stages", "masked")[:, 2]).all()
    ticks = figures(at)["mask_stages"]["layout"]["xaxis"]["ticktext"]
    assert [t.split(" ", 1)[1] for t in ticks] == list(expected.key_tokens)[: len(ticks)]  # keys: source tokens
    assert any("cross-attention" in m.value for m in at.markdown)


@pytest.mark.parametrize("kind", ["t5", "bart"])
def test_masks_page_makes_the_encoder_causal_from_the_chosen_layer_on(kind, family_dir):
    at = _masks_page(kind, family_dir, "encoder", causal=True)  # this layer only (the default): layer 1
    loaded = attnviz.load_model(str(family_dir(kind)))
    expected = attnviz.trace(loaded, SOURCE, target=TARGET, part="encoder", causal=True, layers=(1,)).encoder
    w = _heatmap(at, "mask_weights", "with")
    np.testing.assert_allclose(w, expected.layer(1).weights[0], atol=1e-6)
    assert (w[np.triu(np.ones_like(w, bool), 1)] == 0).all()
    change = array(next(t for t in figures(at)["mask_leak"]["data"] if t.get("name") == "max |Δ weight|")["y"])
    assert change[0] == 0 and change[1] > 0  # layer 0 runs before the experiment


def test_masks_page_hides_a_target_token_from_the_decoder(family_dir):
    at = _masks_page("bart", family_dir, "decoder", hide=[1])  # the decoder is causal already: its toggle is off
    assert at.toggle(key="causal").disabled
    loaded = attnviz.load_model(str(family_dir("bart")))
    expected = attnviz.trace(loaded, SOURCE, target=TARGET, part="decoder", hide=(1,), layers=(1,)).decoder
    w = _heatmap(at, "mask_weights", "with")
    np.testing.assert_allclose(w, expected.layer(1).weights[0], atol=1e-6)
    assert (w[:, 1] == 0).all() and not at.warning


def test_cross_attention_opens_with_the_causal_mask_off(family_dir):
    at = _masks_page("bart", family_dir, "cross")  # no widget set: the page's defaults
    assert at.toggle(key="causal").value is False and not at.toggle(key="causal").disabled
    loaded = attnviz.load_model(str(family_dir("bart")))
    plain = attnviz.trace(loaded, SOURCE, target=TARGET).cross
    np.testing.assert_allclose(_heatmap(at, "mask_weights", "with"), plain.layer(1).weights[0], atol=1e-6)
