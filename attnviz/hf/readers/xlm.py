"""XLM and FlauBERT: one MultiHeadAttention, (q / sqrt(d)) . k with the mask's hidden cells at dtype min."""

from __future__ import annotations

import math

import torch

from .. import recorder
from .call import Call, Reader, heads


def xlm(module, a: dict) -> Call:
    """XLM / FlauBERT MultiHeadAttention: (q / sqrt(d)) . k, cells where the mask is 0 take dtype min, softmax.

    The mask is [batch, key] (bidirectional) or [batch, query, key] (causal), 1 = may attend.
    """
    x, mask, cache = a["input"], a["mask"], a.get("cache")
    if a.get("kv") is not None:
        raise recorder.CaptureRefused("cross-attention")
    if cache is not None and cache.get_seq_length(module.layer_id) > 0:
        raise recorder.CaptureRefused("a key/value cache")
    q, k = heads(module.q_lin(x), module.n_heads), heads(module.k_lin(x), module.n_heads)
    b, n = x.shape[:2]
    allowed = (mask != 0).view((b, 1, n, -1) if mask.dim() == 3 else (b, 1, 1, -1))
    return Call(q, k, 1 / math.sqrt(module.head_dim), allowed, float(torch.finfo(q.dtype).min), None, "q")


#: Each family's attention module (transformers.models.<module>.modeling_<module>.<class>) -> how attnviz reads it.
ROWS = {
    "xlm.MultiHeadAttention": Reader("XLM", xlm),
    "flaubert.MultiHeadAttention": Reader("FlauBERT", xlm),
}
