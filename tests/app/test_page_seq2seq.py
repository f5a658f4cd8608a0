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


def test_masks_page_says_experiments_wait_for_encoder_decoders(family_dir):
    at = run_page("app_pages/masks.py", text=SOURCE, source="hub", model=str(family_dir("bart")), target=TARGET)
    assert not at.exception
    assert any("encoder-decoder" in w.value for w in at.warning)
