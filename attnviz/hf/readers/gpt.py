"""Decoders that compute attention in their own code: OpenAI GPT and GPT-Neo (their own causal or window tables),
XGLM (a table row), GPT-J and CodeGen (rotary on part of the features), GPT-NeoX-Japanese (partial rotary)."""

from __future__ import annotations

import math

import torch

from ...attention import DEFAULT_FILL
from .call import Call, Projected, Reader, additive, both, fill_of, heads


def openai_gpt(module, a: dict) -> Call:
    """OpenAI GPT's Attention: w = q.k (/ sqrt(d) when module.scale); causal cells REPLACED by -10000 (w * b - 1e4 *
    (1 - b)); then the additive padding mask (0 or dtype min) is added; softmax.

    The fill is -10000, what the model puts in causally hidden cells; padding keys hold dtype min in the model, which
    weighs the same (0) while the row has a visible key (a row with none is refused, see `both`).
    """
    x, mask = a["x"], a.get("attention_mask")
    b, n, _ = x.shape
    q, k, _ = module.c_attn(x).split(module.split_size, dim=2)
    q, k = heads(q, module.n_head), heads(k, module.n_head)
    allowed, extra = additive(mask, n, "GPT")
    allowed = both(allowed, module.bias[0, 0, :n, :n].bool(), "GPT")
    return Call(q, k, 1 / math.sqrt(q.shape[-1]) if module.scale else 1.0, allowed, -1e4, extra)


#: XGLMAttention: (q_proj(x) * scaling) . k + the additive causal mask, clamped at dtype min, softmax.
XGLM = Projected(
    "XGLM", q="q_proj", k="k_proj", heads="num_heads", scaling="scaling", scale_on="q", cross="key_value_states"
)


def gpt_neo(module, a: dict) -> Call:
    """GPTNeoSelfAttention: q.k in float32, NO 1/sqrt(d) scale (1.0); cells outside its own causal (global layers)
    or sliding-window (local layers) table take float32 min; then the additive mask is added; softmax.

    The window table is part of the recorded mask. Cells both tables hide hold min + min = -inf in the model and
    float32 min here: both weigh 0 while the row has a visible key (a row with none is refused, see `both`).
    """
    x, mask = a["hidden_states"], a.get("attention_mask")
    n = x.shape[1]
    q, k = (heads(p(x), module.num_heads).float() for p in (module.q_proj, module.k_proj))
    allowed, extra = additive(mask, n, "GPT-Neo")
    allowed = both(allowed, module.bias[0, 0, :n, :n], "GPT-Neo")
    return Call(q, k, 1.0, allowed, float(torch.finfo(torch.float32).min), extra)


def _rotary(module, q, k, position_ids, cast: bool):
    """GPT-J / CodeGen rotary embedding on the first rotary_dim features of q and k ([batch, seq, head, d]) as the
    module applies it (every second feature pair rotated), returned as [batch, head, seq, d] float32."""
    from transformers.models.gptj.modeling_gptj import apply_rotary_pos_emb

    sincos = module.embed_positions.to(position_ids.device)[position_ids]
    sin, cos = torch.split(sincos.to(k.dtype) if cast else sincos, sincos.shape[-1] // 2, dim=-1)
    r = module.rotary_dim or q.shape[-1]
    q = torch.cat([apply_rotary_pos_emb(q[..., :r], sin, cos), q[..., r:].to(sin.dtype)], dim=-1)
    k = torch.cat([apply_rotary_pos_emb(k[..., :r], sin, cos), k[..., r:].to(sin.dtype)], dim=-1)
    return q.permute(0, 2, 1, 3).float(), k.permute(0, 2, 1, 3).float()


def gptj(module, a: dict) -> Call:
    """GPTJAttention: rotary on q, k (the first rotary_dim features), q.k in float32 / sqrt(d) + additive mask."""
    x, mask = a["hidden_states"], a.get("attention_mask")
    b, n, _ = x.shape
    h = module.num_attention_heads
    q, k = (p(x).view(b, n, h, module.head_dim) for p in (module.q_proj, module.k_proj))
    q, k = _rotary(module, q, k, a["position_ids"], cast=True)
    allowed, extra = additive(mask, n, "GPT-J")
    fill = DEFAULT_FILL if mask is None else float(torch.finfo(mask.dtype).min)
    return Call(q, k, 1 / module.scale_attn, allowed, fill, extra)


def codegen(module, a: dict) -> Call:
    """CodeGenAttention: fused qkv in 4 model-parallel blocks (q, v, k), rotary as GPT-J, then (q.k + mask) /
    sqrt(d): the mask is added BEFORE the scale, so the fill is dtype min / sqrt(d) and a bias is divided too."""
    x, mask = a["hidden_states"], a.get("attention_mask")
    b, n, _ = x.shape
    h, d, mp = module.num_attention_heads, module.head_dim, 4
    blocks = module.qkv_proj(x).reshape(b, n, mp, -1)
    q, _, k = torch.split(blocks, d * h // mp, dim=-1)
    q, k = (t.reshape(b, n, mp, h // mp, d).reshape(b, n, h, d) for t in (q, k))
    q, k = _rotary(module, q, k, a["position_ids"], cast=False)
    allowed, extra = additive(mask, n, "CodeGen")
    fill = DEFAULT_FILL if mask is None else torch.finfo(mask.dtype).min
    fill = float(torch.tensor(fill, dtype=torch.float32) / module.scale_attn)
    return Call(q, k, 1 / module.scale_attn, allowed, fill, None if extra is None else extra / module.scale_attn)


def gpt_neox_japanese(module, a: dict) -> Call:
    """GPTNeoXJapaneseAttention: fused qkv per head [q | k | v], rotary (position_embeddings) on the first
    rotary_ndims features, baddbmm(q, k^T, alpha=1/sqrt(d)) + the additive causal mask, softmax."""
    from transformers.models.gpt_neox_japanese.modeling_gpt_neox_japanese import apply_rotary_pos_emb

    x, mask = a["hidden_states"], a.get("attention_mask")
    b, n, _ = x.shape
    h, d, r = module.num_attention_heads, module.head_size, module.rotary_ndims
    qkv = module.query_key_value(x).view(b, n, h, 3 * d).permute(0, 2, 1, 3)
    q, k = qkv[..., :d], qkv[..., d : 2 * d]
    cos, sin = a["position_embeddings"]
    q_rot, k_rot = apply_rotary_pos_emb(q[..., :r], k[..., :r], cos, sin)
    q, k = torch.cat((q_rot, q[..., r:]), dim=-1), torch.cat((k_rot, k[..., r:]), dim=-1)
    allowed, extra = additive(mask, n, "GPT-NeoX-Japanese")
    return Call(q, k, 1 / module.norm_factor, allowed, fill_of(mask), extra)


#: Each family's attention module (transformers.models.<module>.modeling_<module>.<class>) -> how attnviz reads it.
ROWS = {
    "openai.Attention": Reader("GPT", openai_gpt),
    "xglm.XGLMAttention": Reader("XGLM", XGLM),
    "gpt_neo.GPTNeoSelfAttention": Reader("GPT-Neo", gpt_neo),
    "gptj.GPTJAttention": Reader("GPT-J", gptj),
    "codegen.CodeGenAttention": Reader("CodeGen", codegen),
    "gpt_neox_japanese.GPTNeoXJapaneseAttention": Reader("GPT-NeoX-Japanese", gpt_neox_japanese),
}
