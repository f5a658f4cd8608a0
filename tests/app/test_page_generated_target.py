"""An encoder-decoder page without a typed target says what the model generated, as text."""

from __future__ import annotations

import torch
from helpers import run_page, shown

import attnviz

SOURCE = "the cat sat on the mat"


def test_the_greedy_target_of_an_encoder_decoder_is_shown_as_text(family_dir):
    folder = family_dir("t5")
    loaded = attnviz.load_model(str(folder))
    with torch.no_grad():  # what the model writes, generated here without attnviz
        enc = loaded.tokenizer(SOURCE, return_tensors="pt")
        ids = loaded.model.generate(**enc, max_new_tokens=48, do_sample=False)[0, 1:-1].tolist()
    expected = loaded.tokenizer.decode(ids, skip_special_tokens=True)
    assert expected.strip()
    at = run_page("app_pages/heads.py", text=SOURCE, source="hub", model=str(folder), part="decoder")
    said = [shown(w.value) for w in at.warning]
    assert any(f"generated greedily by the model: “{expected}”" in s for s in said), (expected, said)
