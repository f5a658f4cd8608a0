"""The capture seam: one attention function registered with transformers that records what every stage is made of.

Models that dispatch through `AttentionInterface` call it with q, k, v already projected, split into heads
and position-encoded ([batch, head, seq, head_dim]). It records q and k (k with its key/value heads not yet
expanded), the scale, the boolean mask and any additive bias, then runs transformers' own SDPA attention, so
a trace costs about what the model's fastest forward pass costs. The stages are computed later, per layer,
from the record (`attnviz.trace`). A layer under an experiment (causal, hidden keys, another scale or fill)
is computed by `attnviz.attention.stages_from_scores` instead, so the experiment's exact effect reaches the
later layers.

The mask builder registered under the same name always gives an explicit mask (never "no mask, is_causal"),
so the record holds the mask the model really used.

Keyword arguments are handled by an allow-list: the ones that change the result are applied, the ones that
only steer other kernels are ignored by name, and anything else with a value refuses the capture
(`CaptureRefused`): an unknown argument such as a position bias is never silently dropped.

What a call records goes into this thread's `Recorder` (attnviz.hf.recorder); forward passes are run by
attnviz.hf.passes.
"""

from __future__ import annotations

import math
import threading

import torch

from ..attention import DEFAULT_FILL
from . import kernels, recorder
from .recorder import UNKNOWN_OUTPUT, CaptureRefused, apply_experiment

CAPTURE_NAME = "attnviz"

#: Arguments that only steer other kernels (flash, paged caches) or are already part of the mask.
IGNORED_ARGUMENTS = frozenset(
    {
        *("is_causal", "sliding_window", "position_ids", "cache_position", "layer_idx", "output_attentions"),
        *("output_hidden_states", "return_dict", "use_cache", "past_key_values", "past_key_value"),
        *("cu_seq_lens_q", "cu_seq_lens_k", "max_length_q", "max_length_k", "target_dtype", "attention_type"),
        "deterministic",  # ModernBERT: whether flash attention's backward pass is deterministic
        "output_router_logits",  # Switch Transformers, NLLB-MoE: whether the MoE layers return their router logits
        "input_ids",  # GLM-5-Next passes the model's token ids down to every layer: no attention math reads them
    }
)

#: Attention modules that multiply q (and k) by the scale themselves and then pass scaling=1.0 to the seam:
#: module path and class -> (factor on q, factor on k). The record divides them out again, so its scores are the raw
#: q.k and its scale the one the model really applied (`LayerRecord.scale_on` says where it applied it).
PRESCALED = {
    "transformers.models.opt.modeling_opt.OPTAttention": lambda m: (m.scaling, 1.0),
    "transformers.models.esm.modeling_esm.EsmSelfAttention": lambda m: (m.attention_head_size**-0.5, 1.0),
    "transformers.models.openai_privacy_filter.modeling_openai_privacy_filter.OpenAIPrivacyFilterAttention": (
        lambda m: (m.scaling, m.scaling)
    ),
}
_register_lock = threading.Lock()


def check_arguments(kwargs: dict) -> None:
    """Refuse any argument with a value that is neither handled nor known to be safe to ignore."""
    unknown = sorted(k for k, v in kwargs.items() if v is not None and k not in IGNORED_ARGUMENTS)
    if unknown:
        raise CaptureRefused(f"attention with {', '.join(unknown)}")


def split_mask(attention_mask: torch.Tensor | None, n_key: int) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """The model's mask as (boolean "may attend" [batch, 1, query, key], additive bias or None).

    A mask with a head axis (Doge's per-head dynamic mask, Falcon's ALiBi mask) keeps its values per head in the
    bias; the cells it hides must be the same for every head (one mask per layer), else the capture is refused.
    """
    if attention_mask is None:
        return None, None
    mask = attention_mask[..., :n_key]
    allowed = mask if mask.dtype == torch.bool else mask > torch.finfo(mask.dtype).min / 2
    if allowed.dim() == 4 and allowed.shape[1] > 1:
        if not bool((allowed == allowed[:, :1]).all()):
            raise CaptureRefused("a mask that hides different cells for different heads")
        allowed = allowed[:, :1]
    if mask.dtype == torch.bool:
        return allowed, None
    bias = torch.where(allowed, mask, torch.zeros_like(mask))
    return allowed, (bias if bias.any() else None)


def capture_attention(
    module,
    query,
    key,
    value,
    attention_mask,
    scaling=None,
    dropout=0.0,
    position_bias=None,
    softcap=None,
    s_aux=None,
    sinks=None,
    **kwargs,
):
    """Attention as the model computes it, recording q, k, scale, mask, fill, bias, softcap and sinks of every call.

    position_bias (T5) is added to the scaled scores, softcap (Gemma 2) caps them with tanh, s_aux (gpt-oss) holds
    one sink logit per head and sinks (Inkling 2) one per query that joins the softmax; every other argument is
    checked by `check_arguments`. A scale the module folded into q (OPT, ESM) is divided out again (`unscaled`).
    """
    attention_mask = _select_keys(attention_mask, kwargs.pop("indices", None), key.shape[-2])
    check_arguments(kwargs)
    rec = recorder.current()
    scale = query.shape[-1] ** -0.5 if scaling is None else float(scaling)
    given = (query, key)  # what the model's own kernel gets
    query, key, scale, scale_on = unscaled(module, query, key, scale)
    n_q, n_k = query.shape[-2], key.shape[-2]
    allowed, bias = _with_position_bias(split_mask(attention_mask, n_k), position_bias)
    extra = dict(bias=bias, softcap=None if softcap is None else float(softcap), sinks=_sinks(s_aux, sinks, query))
    changed, fill, structure, norms = False, DEFAULT_FILL, None, None
    if rec is not None:
        role, layer = rec.position(module)
        allowed, scale, fill, changed = apply_experiment(rec, layer, allowed, scale, n_q, n_k, query.device, role)
        structure = rec.structure(allowed, query, key)
    own_kernel = not changed and softcap is None and extra["sinks"] is None
    plain = structure is not None and fill in (DEFAULT_FILL, -math.inf) and extra["bias"] is None
    fused = own_kernel and plain and _fused(structure, given, value, scaling, module, dropout)
    if fused:
        out, norms = fused
    elif own_kernel:  # the model's own fastest kernel, with the model's own mask
        from transformers.integrations.sdpa_attention import sdpa_attention_forward

        out = sdpa_attention_forward(
            module, *given, value, attention_mask, dropout=dropout, scaling=scaling, position_bias=position_bias
        )[0]
    else:
        out, norms = kernels.chunked(query, key, value, scale, allowed, fill, extra, dropout, module.training)
    if rec is not None:
        rec.keep(module, query, key, scale, structure, fill, extra, scale_on, norms, value, UNKNOWN_OUTPUT)
    return out, None


def _fused(structure, given: tuple, value, scaling, module, dropout: float):
    """(output, norms) from SDPA's own kernel where it computes this call exactly and runs on this device, else None."""
    if not kernels.fusable(structure, given[0], value, module, dropout):
        return None
    return kernels.fused(*given, value, scaling, structure.causal)


def _with_position_bias(split: tuple, position_bias):
    """(allowed, bias) of `split_mask` with a position bias (T5) added to the mask's own bias."""
    allowed, bias = split
    if position_bias is not None:
        bias = position_bias if bias is None else position_bias + bias
    return allowed, bias


def _sinks(s_aux, sinks, query):
    """Sink logits as the stages take them: s_aux [head] (gpt-oss), or sinks [batch, head, query, 1] (Inkling 2, one
    per query) as [batch, head, query]. Any other shape, or both at once, is refused rather than misread."""
    if sinks is None:
        return s_aux
    if s_aux is not None or sinks.dim() != 4 or sinks.shape[-1] != 1 or sinks.shape[1:3] != query.shape[1:3]:
        raise CaptureRefused(f"attention sinks shaped {tuple(sinks.shape)}")
    return sinks[..., 0]


def unscaled(module, query, key, scale: float):
    """(q, k, scale, where) with a scale the model folded into q (and k) before the call divided out again.

    OPT and ESM multiply q by 1/sqrt(d_head) and pass scaling=1.0: recorded as they are, the scores stage would
    already be scaled and the scale would read 1.0. Any other module, or another scaling, is left as it came.
    """
    factors = PRESCALED.get(f"{type(module).__module__}.{type(module).__qualname__}")
    if factors is None or scale != 1.0:
        return query, key, scale, "scores"
    on_q, on_k = (float(f) for f in factors(module))
    where = "q" if on_k == 1.0 else "q and k"
    return query / on_q, (key if on_k == 1.0 else key / on_k), on_q * on_k, where


def _select_keys(attention_mask, indices, n_key: int):
    """The mask with only the keys a sparse-attention indexer chose (DeepSeek-V3.2: top-k key `indices` per query,
    [batch, query, k]) left visible, exactly as transformers' eager path turns them into a mask."""
    if indices is None:
        return attention_mask
    chosen = torch.zeros(*indices.shape[:2], n_key, dtype=torch.bool, device=indices.device)
    chosen = chosen.scatter(-1, indices.long(), True).unsqueeze(1)  # [batch, 1, query, key]
    if attention_mask is None:
        return chosen
    if attention_mask.dtype == torch.bool:
        return attention_mask[..., :n_key] & chosen
    return attention_mask[..., :n_key].masked_fill(~chosen, torch.finfo(attention_mask.dtype).min)


def explicit_mask(*args, **kwargs):
    """transformers' boolean SDPA mask, always materialised (never None with an implied is_causal)."""
    from transformers.masking_utils import sdpa_mask

    kwargs.pop("allow_is_causal_skip", None)
    kwargs.pop("allow_is_bidirectional_skip", None)
    return sdpa_mask(*args, allow_is_causal_skip=False, allow_is_bidirectional_skip=False, **kwargs)


def register() -> None:
    """Register the seam function and its mask builder with transformers (idempotent)."""
    with _register_lock:
        from transformers import AttentionInterface
        from transformers.masking_utils import AttentionMaskInterface

        AttentionInterface.register(CAPTURE_NAME, capture_attention)
        AttentionMaskInterface.register(CAPTURE_NAME, explicit_mask)  # without it the function gets mask=None
