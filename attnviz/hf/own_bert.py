"""Readers of BERT-style families that compute attention in their own code: q.k / sqrt(d) (+ a position bias) + the
additive mask, softmax. MegatronBERT, RemBERT, BigBird (full attention), ConvBERT (its attention half), RoFormer
(rotary), SqueezeBERT (1x1 convolutions), I-BERT (its float path), MPNet (relative position bias), GPT-NeoX-Japanese
(partial rotary), Nystromformer (its exact path), DeBERTa and DeBERTa-v2 / v3 (disentangled position terms as the
bias). Each turns the arguments an attention module is about to use into a Call (attnviz.hf.own_call), computed as
the module computes it; attnviz.hf.own registers them and checks them against the model at load.
"""

from __future__ import annotations

import math

import torch

from . import capture
from .own_call import Call, Projected, additive, fill_of, heads

#: BERT's own code before the attention interface (MegatronBERT, RemBERT, BigBird full, ConvBERT): q = query(x),
#: k = key(x), (q.k) / sqrt(attention_head_size) + the additive mask (padding, causal for a decoder), softmax.
#: ConvBERT's heads are its attention half only (num_attention_heads / head_ratio, each half the usual width): the
#: span-based convolution half mixes tokens through a per-token kernel, not a query-by-key map.
BERT = Projected()

#: RoFormerSelfAttention: as BERT, q and k turned by the rotary embedding the model passes (sinusoidal_pos), with the
#: module's own rotation (every second feature pair).
ROFORMER = Projected("RoFormer", rotary=True)

#: MPNetSelfAttention: (q.k) / sqrt(d) + the relative position bias (position_bias, one per head, computed once from
#: bucketed relative positions) + the additive mask, softmax. The position bias is the recorded bias.
MPNET = Projected("MPNet", q="q", k="k", bias="position_bias")

#: Nystromformer's exact path: q and k each divided by d^(1/4) (scale_on "q and k"), q.k + the additive mask.
_NYSTROMFORMER_EXACT = Projected("Nystromformer", scale_on="q and k")


def squeezebert(module, a: dict) -> Call:
    """SqueezeBertSelfAttention: x is [batch, channel, seq]; q, k from grouped 1x1 convolutions; (q.k) / sqrt(d) +
    the additive mask, softmax. Its output_attentions gives the masked scores, not the weights (`returns`)."""
    x, mask = a["hidden_states"], a.get("attention_mask")
    q, k = module.transpose_for_scores(module.query(x)), module.transpose_for_scores(module.key(x))
    allowed, extra = additive(mask, x.shape[-1], "SqueezeBERT")
    return Call(q, k, 1 / math.sqrt(module.attention_head_size), allowed, fill_of(mask), extra)


def ibert(module, a: dict) -> Call:
    """IBertSelfAttention, float path (quant_mode off): as `bert`, q and k through the module's QuantLinear and QuantAct
    (identities there). The integer path (quant_mode on) approximates softmax in integers: refused."""
    if module.quant_mode:
        raise capture.CaptureRefused("I-BERT's integer-only mode (its softmax is an integer approximation)")
    x, mask, sf = a["hidden_states"], a.get("attention_mask"), a.get("hidden_states_scaling_factor")
    h = module.num_attention_heads
    q = heads(module.query_activation(*module.query(x, sf))[0], h)
    k = heads(module.key_activation(*module.key(x, sf))[0], h)
    allowed, extra = additive(mask, x.shape[1], "I-BERT")
    return Call(q, k, 1 / math.sqrt(module.attention_head_size), allowed, fill_of(mask), extra)


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


def nystromformer(module, a: dict) -> Call:
    """NystromformerSelfAttention on its exact path (num_landmarks == segment_means_seq_len). With fewer landmarks it
    approximates softmax through landmark means and an iterative pseudo-inverse (Nyström), which no q.k map
    reproduces: refused."""
    if module.num_landmarks != module.seq_len:
        raise capture.CaptureRefused("Nyström-approximated attention (fewer landmarks than segment_means_seq_len)")
    return _NYSTROMFORMER_EXACT(module, a)


def deberta(module, a: dict) -> Call:
    """DeBERTa's DisentangledSelfAttention: q (+ q_bias) divided by sqrt(d * (1 + the number of position terms)) before
    q.k (scale_on "q"), plus the disentangled position terms (content-to-position, position-to-content) the module's
    own disentangled_att_bias computes from the scaled q, k and the relative embeddings: recorded as the bias. The
    boolean mask hides cells with dtype min. Talking-heads projections (head_logits_proj) mix heads: refused."""
    if module.head_logits_proj is not None or module.head_weights_proj is not None:
        raise capture.CaptureRefused("talking-heads projections that mix the heads' scores")
    if a.get("query_states") is not None:
        raise capture.CaptureRefused("separate query states (enhanced mask decoder)")
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
        raise capture.CaptureRefused("separate query states (enhanced mask decoder)")
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
