"""Families that compute attention in their own code (BLOOM, Falcon, MPT, GPT, XGLM, GPT-Neo, GPT-J, CodeGen, XLM,
FlauBERT, and the BERT-style readers of attnviz.hf.own_bert): every stage, read from what each layer is given.

Such a family never calls the capture seam, so it runs with eager attention. For a family in `REPRODUCERS`, a
forward pre-hook on every attention module reads what the module is about to use (its input, its ALiBi bias, its
mask) and records one LayerRecord per layer: q and k from the module's own projections, computed as its code
computes them, the module's own scale, the boolean mask, the fill and the bias. The hook changes nothing: the model
runs its own code and its outputs stay the eager ones. The hooks record only inside `capture.recording`, into that
thread's Recorder and only when it asks for them (`own_code`), so one model shared by several sessions is safe.

A reproduction is trusted only once checked: `install` runs the model with output_attentions=True and compares
the weights computed from the records with the model's own; if they differ beyond float rounding, the hooks are
removed and the model stays weights-only, with a note that says why. Wrong stages are never shown.

Experiments that change attention (causal, hidden keys, another scale or fill) are refused for these families
(`attnviz.hf.tracing`): the model's own code would not apply them, and a trace must not pretend it did.
"""

from __future__ import annotations

import inspect
import math
import weakref

import torch

from ..attention import DEFAULT_FILL
from . import capture, own_bert
from .own_call import Call, Projected, Reproducer, additive, both, fill_of, heads


def bloom(module, a: dict) -> Call:
    """BloomAttention: alibi.baddbmm(q, k^T, beta=beta, alpha=inv_norm_factor) + the additive mask, softmax.

    The ALiBi bias is slope * key position (BLOOM relies on softmax ignoring a per-row constant), as the model adds it.
    """
    x, mask = a["hidden_states"], a.get("attention_mask")
    b, n, _ = x.shape
    fused = module.query_key_value(x).view(b, n, module.num_heads, 3, module.head_dim)
    q, k = fused[..., 0, :].transpose(1, 2), fused[..., 1, :].transpose(1, 2)
    if mask is not None and mask.dtype == torch.bool:
        raise capture.CaptureRefused("a boolean mask where BLOOM adds an additive one")
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
            raise capture.CaptureRefused("a Falcon config with num_kv_heads != num_attention_heads in neither layout")
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
        raise capture.CaptureRefused("an additive mask where MPT expects a boolean one")
    if bias is not None:  # [head, 1, max_seq_len], cut to the keys as the model cuts it
        bias = bias[:, max(0, bias.size(1) - n) :, max(0, bias.size(2) - n) :].unsqueeze(0)
    allowed = None if mask is None else ~mask
    return Call(q, k, float(module.softmax_scale), allowed, float(torch.finfo(q.dtype).min), bias)


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


def xlm(module, a: dict) -> Call:
    """XLM / FlauBERT MultiHeadAttention: (q / sqrt(d)) . k, cells where the mask is 0 take dtype min, softmax.

    The mask is [batch, key] (bidirectional) or [batch, query, key] (causal), 1 = may attend.
    """
    x, mask, cache = a["input"], a["mask"], a.get("cache")
    if a.get("kv") is not None:
        raise capture.CaptureRefused("cross-attention")
    if cache is not None and cache.get_seq_length(module.layer_id) > 0:
        raise capture.CaptureRefused("a key/value cache")
    q, k = heads(module.q_lin(x), module.n_heads), heads(module.k_lin(x), module.n_heads)
    b, n = x.shape[:2]
    allowed = (mask != 0).view((b, 1, n, -1) if mask.dim() == 3 else (b, 1, 1, -1))
    return Call(q, k, 1 / math.sqrt(module.head_dim), allowed, float(torch.finfo(q.dtype).min), None, "q")


#: Attention module classes (module path and class name) whose own code attnviz reproduces.
REPRODUCERS = {
    "transformers.models.bloom.modeling_bloom.BloomAttention": Reproducer("BLOOM", bloom),
    "transformers.models.mpt.modeling_mpt.MptAttention": Reproducer("MPT", mpt),
    "transformers.models.falcon.modeling_falcon.FalconAttention": Reproducer("Falcon", falcon),
    "transformers.models.openai.modeling_openai.Attention": Reproducer("GPT", openai_gpt),
    "transformers.models.xglm.modeling_xglm.XGLMAttention": Reproducer("XGLM", XGLM),
    "transformers.models.gpt_neo.modeling_gpt_neo.GPTNeoSelfAttention": Reproducer("GPT-Neo", gpt_neo),
    "transformers.models.gptj.modeling_gptj.GPTJAttention": Reproducer("GPT-J", gptj),
    "transformers.models.codegen.modeling_codegen.CodeGenAttention": Reproducer("CodeGen", codegen),
    "transformers.models.xlm.modeling_xlm.MultiHeadAttention": Reproducer("XLM", xlm),
    "transformers.models.flaubert.modeling_flaubert.MultiHeadAttention": Reproducer("FlauBERT", xlm),
    "transformers.models.megatron_bert.modeling_megatron_bert.MegatronBertSelfAttention": Reproducer(
        "MegatronBERT", own_bert.BERT
    ),
    "transformers.models.rembert.modeling_rembert.RemBertSelfAttention": Reproducer("RemBERT", own_bert.BERT),
    "transformers.models.big_bird.modeling_big_bird.BigBirdSelfAttention": Reproducer("BigBird", own_bert.BERT),
    "transformers.models.convbert.modeling_convbert.ConvBertSelfAttention": Reproducer("ConvBERT", own_bert.BERT),
    "transformers.models.roformer.modeling_roformer.RoFormerSelfAttention": Reproducer("RoFormer", own_bert.ROFORMER),
    "transformers.models.squeezebert.modeling_squeezebert.SqueezeBertSelfAttention": Reproducer(
        "SqueezeBERT", own_bert.squeezebert, returns="masked", channels_first=True
    ),
    "transformers.models.ibert.modeling_ibert.IBertSelfAttention": Reproducer("I-BERT", own_bert.ibert),
    "transformers.models.mpnet.modeling_mpnet.MPNetSelfAttention": Reproducer("MPNet", own_bert.MPNET),
    "transformers.models.deberta.modeling_deberta.DisentangledSelfAttention": Reproducer("DeBERTa", own_bert.deberta),
    "transformers.models.deberta_v2.modeling_deberta_v2.DisentangledSelfAttention": Reproducer(
        "DeBERTa-v2", own_bert.deberta_v2
    ),
    "transformers.models.nystromformer.modeling_nystromformer.NystromformerSelfAttention": Reproducer(
        "Nystromformer", own_bert.nystromformer
    ),
    "transformers.models.gpt_neox_japanese.modeling_gpt_neox_japanese.GPTNeoXJapaneseAttention": Reproducer(
        "GPT-NeoX-Japanese", own_bert.gpt_neox_japanese
    ),
}

_HOOKS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # module -> its hook handle (never hooked twice)


def reproducer_of(module) -> Reproducer | None:
    return REPRODUCERS.get(f"{type(module).__module__}.{type(module).__qualname__}")


def eager_gives_scores(model) -> bool:
    """Whether the model's output_attentions are its masked scores, not its weights (SqueezeBERT): their softmax is."""
    return any(r is not None and r.returns == "masked" for r in map(reproducer_of, model.modules()))


def recording_hook(read):
    """A forward pre-hook that records the module's Call into this thread's Recorder (none outside `recording`)."""

    def hook(module, args, kwargs):
        rec = capture.current()
        if rec is None or not rec.own_code:  # the seam's own probe and forwards of other kinds: not ours to record
            return None
        a = inspect.signature(module.forward).bind_partial(*args, **kwargs).arguments
        if any(a.get(name) is not None for name in ("layer_past", "past_key_values")):
            raise capture.CaptureRefused("a key/value cache")
        if rec.experiment.changes_attention:
            raise capture.CaptureRefused("an experiment this family's own attention code does not apply")
        call = read(module, a)
        extra = dict(bias=call.bias, softcap=None, sinks=None)
        rec.keep(module, call.q, call.k, call.scale, call.allowed, call.fill, extra, call.scale_on)
        return None

    return hook


def install(model, checks: list[dict]) -> tuple[capture.Recorder | None, str]:
    """Hook the attention modules of a family in REPRODUCERS and check the records against the model's own weights
    on every input of `checks`.

    Returns (the last check's Recorder: attention modules in call order, q and k per layer, "") when every check
    holds; (None, note) when the family is known but its reproduction failed (hooks removed, weights only); (None, "")
    for any other family.
    """
    modules = [m for m in model.modules() if reproducer_of(m) is not None]
    if not modules:
        return None, ""
    for m in modules:
        if m not in _HOOKS:
            _HOOKS[m] = m.register_forward_pre_hook(recording_hook(reproducer_of(m).read), with_kwargs=True)
    rec, problem = None, ""
    for inputs in checks:
        try:
            rec, problem = check(model, inputs)
        except Exception as e:  # noqa: BLE001 - any failure means the stages cannot be trusted
            rec, problem = None, f"{type(e).__name__}: {(str(e).splitlines() or [''])[0][:160]}"
        if problem:
            break
    if not problem:
        return rec, ""
    for m in modules:
        _HOOKS.pop(m).remove()
    family = reproducer_of(modules[0]).family
    return None, f"attnviz's reading of {family} attention did not match the model's own weights ({problem})"


def check(model, inputs: dict) -> tuple[capture.Recorder | None, str]:
    """(the Recorder, "") when the weights computed from its records equal the model's, else (None, what).

    A family whose output_attentions gives the masked scores (Reproducer.returns) is compared on that stage."""
    rec = capture.Recorder(own_code=True)
    with capture.recording(rec):
        attentions = [a for a in capture.forward_eager(model, inputs) if a is not None]
    if len(attentions) != len(rec.layers):
        return None, f"{len(rec.layers)} layers recorded, {len(attentions)} returned"
    tolerance = 1e-4 if attentions and attentions[0].dtype == torch.float32 else 3e-2
    returns = [reproducer_of(m).returns for m in rec.modules]
    with torch.inference_mode():
        worst = max(
            (
                (getattr(r.stages(), what).float() - a[0].float()).abs().max().item()
                for r, a, what in zip(rec.layers, attentions, returns)
            ),
            default=float("inf"),
        )
    if not worst <= tolerance:
        return None, f"{'weights' if set(returns) == {'weights'} else 'stages'} differ by up to {worst:.1e}"
    return rec, ""
