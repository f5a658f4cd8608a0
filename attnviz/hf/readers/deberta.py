"""DeBERTa and DeBERTa-v2 / v3: scaled q and k plus the disentangled position terms (content-to-position,
position-to-content) the module computes, recorded as the bias."""

from __future__ import annotations

import torch

from .. import recorder
from .call import Call, Reader


def deberta(module, a: dict) -> Call:
    """DeBERTa's DisentangledSelfAttention: q (+ q_bias) divided by sqrt(d * (1 + the number of position terms)) before
    q.k (scale_on "q"), plus the disentangled position terms (content-to-position, position-to-content) the module's
    own disentangled_att_bias computes from the scaled q, k and the relative embeddings: recorded as the bias. The
    boolean mask hides cells with dtype min. Talking-heads projections (head_logits_proj) mix heads: refused."""
    if module.head_logits_proj is not None or module.head_weights_proj is not None:
        raise recorder.CaptureRefused("talking-heads projections that mix the heads' scores")
    if a.get("query_states") is not None:
        raise recorder.CaptureRefused("separate query states (enhanced mask decoder)")
    x, mask = a["hidden_states"], a["attention_mask"]
    q, k, _ = module.transpose_for_scores(module.in_proj(x)).chunk(3, dim=-1)
    q = q + module.transpose_for_scores(module.q_bias[None, None, :])
    factor = 1 + len(module.pos_att_type)
    scale = torch.sqrt(torch.tensor(q.size(-1), dtype=torch.float) * factor).to(q.dtype)
    bias, rel, pos = None, a.get("rel_embeddings"), a.get("relative_pos")
    if module.relative_attention and rel is not None and pos is not None:
        bias = module.disentangled_att_bias(q / scale, k, pos, module.pos_dropout(rel), factor)
    allowed = (mask.bool() if mask.dim() == 4 else mask.bool().unsqueeze(1))[..., : x.shape[1]]
    return Call(q, k, float(1 / scale), allowed, float(torch.finfo(q.dtype).min), bias, "q")


def deberta_v2(module, a: dict) -> Call:
    """DeBERTa-v2 / v3 DisentangledSelfAttention: q.(k / sqrt(d * factor)), factor = 1 + the number of position terms
    (k carries the scale: scale_on "k"), plus the disentangled position terms its own disentangled_attention_bias
    computes from the unscaled q, k, the log-bucketed relative positions and the (layer-normed) relative embeddings,
    each divided by the same sqrt(d * factor): recorded as the bias. The boolean mask hides cells with dtype min.

    Separate query states (the enhanced mask decoder of a masked-LM head) are refused.
    """
    if a.get("query_states") is not None:
        raise recorder.CaptureRefused("separate query states (enhanced mask decoder)")
    x, mask = a["hidden_states"], a["attention_mask"]
    b, n, _ = x.shape
    h = module.num_attention_heads
    q, k = (module.transpose_for_scores(p(x), h) for p in (module.query_proj, module.key_proj))  # [batch*head, n, d]
    factor = 1 + ("c2p" in module.pos_att_type) + ("p2c" in module.pos_att_type)
    scale = torch.sqrt(torch.tensor(q.size(-1), dtype=torch.float) * factor)  # as the module's scaled_size_sqrt
    bias = None
    if module.relative_attention:
        rel = module.pos_dropout(a["rel_embeddings"])
        bias = module.disentangled_attention_bias(q, k, a.get("relative_pos"), rel, factor)
        bias = bias.view(b, h, n, n) if torch.is_tensor(bias) else None  # 0 when no position term is on
    allowed = (mask.bool() if mask.dim() == 4 else mask.bool().unsqueeze(1))[..., :n]
    q, k = q.view(b, h, n, -1), k.view(b, h, n, -1)
    return Call(q, k, float(1 / scale), allowed, float(torch.finfo(q.dtype).min), bias, "k")


#: Each family's attention module (transformers.models.<module>.modeling_<module>.<class>) -> how attnviz reads it.
ROWS = {
    "deberta.DisentangledSelfAttention": Reader("DeBERTa", deberta),
    "deberta_v2.DisentangledSelfAttention": Reader("DeBERTa-v2", deberta_v2),
}
