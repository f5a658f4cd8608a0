"""Readers of BERT-like families that compute attention in their own code: q.k / sqrt(d) (+ a position bias) + the
additive mask, softmax. MegatronBERT, RemBERT, BigBird (full attention), ConvBERT (its attention half), RoFormer
(rotary), SqueezeBERT (1x1 convolutions), I-BERT (its float path), MPNet (relative position bias), Nystromformer (its
exact path): rows of one table. Each turns the arguments an attention module is about to use into a Call
(attnviz.hf.readers.call), computed as the module computes it.
"""

from __future__ import annotations

import math

from .. import recorder
from .call import Call, Projected, Reader, additive, fill_of, heads

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
        raise recorder.CaptureRefused("I-BERT's integer-only mode (its softmax is an integer approximation)")
    x, mask, sf = a["hidden_states"], a.get("attention_mask"), a.get("hidden_states_scaling_factor")
    h = module.num_attention_heads
    q = heads(module.query_activation(*module.query(x, sf))[0], h)
    k = heads(module.key_activation(*module.key(x, sf))[0], h)
    allowed, extra = additive(mask, x.shape[1], "I-BERT")
    return Call(q, k, 1 / math.sqrt(module.attention_head_size), allowed, fill_of(mask), extra)


def nystromformer(module, a: dict) -> Call:
    """NystromformerSelfAttention on its exact path (num_landmarks == segment_means_seq_len). With fewer landmarks it
    approximates softmax through landmark means and an iterative pseudo-inverse (Nyström), which no q.k map
    reproduces: refused."""
    if module.num_landmarks != module.seq_len:
        raise recorder.CaptureRefused("Nyström-approximated attention (fewer landmarks than segment_means_seq_len)")
    return _NYSTROMFORMER_EXACT(module, a)


#: BERT-like families, one row each: the attention module (transformers.models.<module>.modeling_<module>.<class>)
#: -> how attnviz reads it.
ROWS = {
    "megatron_bert.MegatronBertSelfAttention": Reader("MegatronBERT", BERT),
    "rembert.RemBertSelfAttention": Reader("RemBERT", BERT),
    "big_bird.BigBirdSelfAttention": Reader("BigBird", BERT),
    "convbert.ConvBertSelfAttention": Reader("ConvBERT", BERT),
    "roformer.RoFormerSelfAttention": Reader("RoFormer", ROFORMER),
    "squeezebert.SqueezeBertSelfAttention": Reader("SqueezeBERT", squeezebert, returns="masked", channels_first=True),
    "ibert.IBertSelfAttention": Reader("I-BERT", ibert),
    "mpnet.MPNetSelfAttention": Reader("MPNet", MPNET),
    "nystromformer.NystromformerSelfAttention": Reader("Nystromformer", nystromformer),
}
