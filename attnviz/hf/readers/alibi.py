"""Families that add ALiBi position biases in their own attention code (BLOOM, MPT, and Falcon, which may use
rotary embeddings instead), each cutting its fused projection its own way."""

from __future__ import annotations

import math

import torch

from ...attention import DEFAULT_FILL
from .. import capture, recorder
from .call import Call, Reader, additive, fill_of


def bloom(module, a: dict) -> Call:
    """BloomAttention: alibi.baddbmm(q, k^T, beta=beta, alpha=inv_norm_factor) + the additive mask, softmax.

    The ALiBi bias is slope * key position (BLOOM relies on softmax ignoring a per-row constant), as the model adds it.
    """
    x, mask = a["hidden_states"], a.get("attention_mask")
    b, n, _ = x.shape
    fused = module.query_key_value(x).view(b, n, module.num_heads, 3, module.head_dim)
    q, k = fused[..., 0, :].transpose(1, 2), fused[..., 1, :].transpose(1, 2)
    if mask is not None and mask.dtype == torch.bool:
        raise recorder.CaptureRefused("a boolean mask where BLOOM adds an additive one")
    allowed, extra = capture.split_mask(mask, n)
    bias = module.beta * a["alibi"].view(b, module.num_heads, 1, -1)
    fill = DEFAULT_FILL if mask is None else float(torch.finfo(mask.dtype).min)
    return Call(q, k, float(module.inv_norm_factor), allowed, fill, bias if extra is None else bias + extra)


def falcon(module, a: dict) -> Call:
    """FalconAttention, eager path. Rotary (alibi None): q, k turned by the position_embeddings the model passes,
    q.k / sqrt(d) + the additive mask, softmax. ALiBi: (q.k + alibi) * inv_norm_factor + the mask, softmax; the model
    builds that mask from alibi / sqrt(d) itself (dtype min where hidden), so its visible cells hold ALiBi a second
    time: both are part of the recorded bias (alibi * inv_norm_factor + the mask's values), added to the scaled q.k.

    k keeps the module's key heads: one (multi_query) or num_kv_heads groups (new_decoder_architecture, each serving
    num_heads / num_kv_heads consecutive query heads), expanded per query head only when the stages are computed.
    """
    x, mask, alibi = a["hidden_states"], a.get("attention_mask"), a.get("alibi")
    b, n, _ = x.shape
    q, k = falcon_heads(module, module.query_key_value(x))
    allowed, extra = additive(mask, n, "Falcon")  # an ALiBi mask holds a bias per head: kept per head in `extra`
    fill = fill_of(mask)
    if alibi is None:
        from transformers.models.falcon.modeling_falcon import apply_rotary_pos_emb

        cos, sin = a["position_embeddings"]
        q, k = apply_rotary_pos_emb(q, k, cos, sin)
        return Call(q, k, 1 / math.sqrt(module.head_dim), allowed, fill, extra)
    bias = alibi.view(b, module.num_heads, 1, -1).float() * module.inv_norm_factor  # in float32, as the model adds it
    return Call(q, k, float(module.inv_norm_factor), allowed, fill, bias if extra is None else bias + extra)


def falcon_heads(module, fused: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """q [batch, head, seq, d] and k [batch, key head, seq, d] cut from Falcon's fused projection, per layout:
    new_decoder_architecture: per key head group, [its query heads..., k, v]; multi_query: [every q head, k, v];
    otherwise per head [q, k, v]."""
    b, n, _ = fused.shape
    h, d = module.num_heads, module.head_dim
    if module.new_decoder_architecture:
        groups = fused.view(b, n, -1, h // module.num_kv_heads + 2, d)  # [batch, seq, key head, group + 2, d]
        q, k = groups[:, :, :, :-2].flatten(2, 3), groups[:, :, :, -2]
    elif module.multi_query:
        fused = fused.view(b, n, h + 2, d)
        q, k = fused[:, :, :-2], fused[:, :, -2:-1]
    else:
        if module.num_kv_heads != h:  # the model's own reshape of k to num_kv_heads heads would mix them up
            raise recorder.CaptureRefused("a Falcon config with num_kv_heads != num_attention_heads in neither layout")
        fused = fused.view(b, n, h, 3, d)
        q, k = fused[..., 0, :], fused[..., 1, :]
    return q.transpose(1, 2), k.transpose(1, 2)


def mpt(module, a: dict) -> Call:
    """MptAttention: (q @ k^T) * softmax_scale + the ALiBi position_bias, masked_fill(mask, dtype min), softmax.

    MPT's mask is boolean with True = masked (the eager additive mask turned into booleans).
    """
    x, mask, bias = a["hidden_states"], a.get("attention_mask"), a.get("position_bias")
    b, n, _ = x.shape
    qkv = module.Wqkv(x)
    if module.clip_qkv:
        qkv = qkv.clamp(min=-module.clip_qkv, max=module.clip_qkv)
    q, k, _ = (t.reshape(b, n, module.n_heads, module.head_dim).transpose(1, 2) for t in qkv.chunk(3, dim=2))
    if mask is not None and mask.dtype != torch.bool:
        raise recorder.CaptureRefused("an additive mask where MPT expects a boolean one")
    if bias is not None:  # [head, 1, max_seq_len], cut to the keys as the model cuts it
        bias = bias[:, max(0, bias.size(1) - n) :, max(0, bias.size(2) - n) :].unsqueeze(0)
    allowed = None if mask is None else ~mask
    return Call(q, k, float(module.softmax_scale), allowed, float(torch.finfo(q.dtype).min), bias)


#: Each family's attention module (transformers.models.<module>.modeling_<module>.<class>) -> how attnviz reads it.
ROWS = {
    "bloom.BloomAttention": Reader("BLOOM", bloom),
    "mpt.MptAttention": Reader("MPT", mpt),
    "falcon.FalconAttention": Reader("Falcon", falcon),
}
