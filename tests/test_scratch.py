"""Our module traced on sentences: cross-attention mode (queries from one sentence, keys and values from
another, with valid lengths) agrees with torch.nn.MultiheadAttention."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import attnviz
from attnviz.module.tracing import input_vectors, key_vectors


def _torch_copy(ours: attnviz.MultiHeadAttention) -> torch.nn.MultiheadAttention:
    """torch's MultiheadAttention with our weights packed into its in_proj (rows: q, then k, then v)."""
    theirs = torch.nn.MultiheadAttention(ours.d_model, ours.n_head, batch_first=True)
    with torch.no_grad():
        theirs.in_proj_weight.copy_(torch.cat([ours.w_q.weight, ours.w_k.weight, ours.w_v.weight]))
        theirs.in_proj_bias.copy_(torch.cat([ours.w_q.bias, ours.w_k.bias, ours.w_v.bias]))
        theirs.out_proj.weight.copy_(ours.w_o.weight)
        theirs.out_proj.bias.copy_(ours.w_o.bias)
    return theirs.eval()


@pytest.mark.parametrize("pair", [None, "a second sentence of other length, longer"])
@pytest.mark.parametrize("valid", [None, 3])
def test_cross_attention_mode_matches_torch_multihead_attention(bundled, pair, valid):
    src = attnviz.ModuleSource(bundled, d_model=64, n_head=4, inputs="random", seed=3, cross=True, valid_keys=valid)
    tr = attnviz.trace(src, "The cat sat on the mat.", pair=pair)
    x, _, _ = input_vectors(src, "The cat sat on the mat.")
    kv, key_tokens = key_vectors(src, pair, None)
    assert tr.key_tokens == tuple(key_tokens) and tr.n_keys != tr.n_tokens
    padding = torch.zeros(1, len(key_tokens), dtype=torch.bool)
    if valid is not None:
        padding[:, valid:] = True
    with torch.no_grad():
        _, ref = _torch_copy(src.build())(
            x[None], kv[None], kv[None], key_padding_mask=padding, need_weights=True, average_attn_weights=False
        )
    np.testing.assert_allclose(tr.weights[0], ref[0].numpy(), atol=1e-6)
    if valid is not None:
        assert (tr.weights[0][..., valid:] == 0).all()
