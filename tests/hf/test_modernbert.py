"""ModernBERT through the capture seam: it passes `deterministic` (a flash-attention flag) with every call, which the
seam ignores; its local layers' sliding window is part of the mask the model builds. Built with a 4-token local
window (2 keys either side) so that the window really hides keys in an 11-token text; compared with transformers'
eager attention loaded independently, on a plain and a right-padded text.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import attnviz
from tests.hf import families as fm

ATOL = 1e-5


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    from transformers import ModernBertModel

    folder = tmp_path_factory.mktemp("modernbert")
    config = fm.tiny_config("modernbert")
    config.local_attention, config.sliding_window = 4, 2  # 2 keys either side of the query
    assert list(config.layer_types) == ["full_attention", "sliding_attention"]
    torch.manual_seed(0)
    return fm.save(ModernBertModel(config), folder)


@pytest.mark.parametrize("pad", [0, 3])
def test_every_stage_equals_eager_with_its_sliding_window(folder, pad):
    loaded, tr, n_real = fm.padded_trace(folder, pad)
    assert loaded.route == "seam" and loaded.note == ""
    assert tr.available_stages == attnviz.STAGES and tr.has("scores")
    n = tr.n_tokens
    ids = torch.tensor([tr.provenance.input_ids])
    mask = torch.tensor([[1] * n_real + [0] * pad])
    with torch.no_grad():
        ref = fm.eager_model(folder)(input_ids=ids, attention_mask=mask, output_attentions=True)
    np.testing.assert_allclose(tr.weights, fm.stack_attentions(ref.attentions), rtol=0, atol=ATOL)
    pos = np.arange(n)
    keys = np.broadcast_to(pos < n_real, (n, n))
    np.testing.assert_array_equal(tr.layer_mask(0), keys)  # global layer: every real key
    np.testing.assert_array_equal(tr.layer_mask(1), keys & (abs(pos[:, None] - pos[None, :]) <= 2))
    np.testing.assert_allclose(tr.scale, 8**-0.5)
