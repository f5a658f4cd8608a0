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

Capture state lives in a ContextVar: Streamlit runs each session in its own thread and all sessions share
one cached model, so a global would mix sessions up.
"""

from __future__ import annotations

import contextlib
import contextvars
import inspect
import math
import threading
import weakref
from dataclasses import dataclass, field

import torch

from ..attention import DEFAULT_FILL, causal_mask
from ..errors import InputError, first_line
from ..trace import LayerRecord, Values, output_norms
from ..trace.layers import ScaleOn
from ..trace.mask import StructuredMask, recognise
from . import kernels

CAPTURE_NAME = "attnviz"
#: Why a layer has no values: read from a family's own attention code (q and k only), or no output projection found.
OWN_CODE_VALUES = "attnviz reads this family's queries and keys from its own attention code, but not its values"
UNKNOWN_OUTPUT = (
    "attnviz does not know where this family's attention output projection is, so it cannot size what a head writes"
)

#: Arguments that only steer other kernels (flash, paged caches) or are already part of the mask.
IGNORED_ARGUMENTS = frozenset(
    {"is_causal", "sliding_window", "position_ids", "cache_position", "layer_idx", "output_attentions",
     "output_hidden_states", "return_dict", "use_cache", "past_key_values", "past_key_value", "cu_seq_lens_q",
     "cu_seq_lens_k", "max_length_q", "max_length_k", "target_dtype", "attention_type",
     "deterministic",  # ModernBERT: whether flash attention's backward pass is deterministic
     "output_router_logits",  # Switch Transformers, NLLB-MoE: whether the MoE layers return their router logits
     "input_ids"}  # GLM-5-Next passes the model's token ids down to every layer: no attention math reads them
)  # fmt: skip

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

_CAPTURE: contextvars.ContextVar[Recorder | None] = contextvars.ContextVar("attnviz_capture", default=None)
_register_lock = threading.Lock()


class CaptureRefused(Exception):
    """Raised inside a forward pass when the model asks for attention math the seam does not reproduce."""


class InputsRead(Exception):
    """Raised by a hook that has read all it needs: the rest of the forward pass is skipped, not computed."""


@dataclass(frozen=True)
class Experiment:
    """Changes to the forward pass itself, so their effect reaches every later layer.

    causal / hide / scale / fill / dropping the padding mask apply to `layers` (None = all layers). In an
    encoder-decoder model they apply to one `part` only ("encoder", "decoder" or "cross" attention; its layers
    are counted within the part, its hidden positions index the part's keys); the other parts run as the model
    runs them, on whatever the changed part passed on.
    """

    causal: bool = False
    hide: tuple[int, ...] = ()  # key positions no query may attend
    scale: float | None = None  # replaces the model's own scale
    fill: float | None = None  # replaces the model's fill (dtype min) for masked cells
    pad_mask: bool = True  # False: padded positions stay visible (they soak up attention)
    layers: tuple[int, ...] | None = None
    part: str | None = None  # encoder-decoder models: which attention (None: models with one kind of attention)

    def applies_to(self, layer: int, role: str | None = None) -> bool:
        return (self.part is None or role == self.part) and (self.layers is None or layer in self.layers)

    @property
    def changes_attention(self) -> bool:
        return self.causal or bool(self.hide) or self.scale is not None or self.fill is not None


@dataclass
class Recorder:
    """Per-forward capture state: the experiment in force and what each attention call recorded."""

    experiment: Experiment = field(default_factory=Experiment)
    pad_keys: torch.Tensor | None = None  # [key] bool, True at padding positions
    layers: list[LayerRecord] = field(default_factory=list)
    modules: list[torch.nn.Module] = field(default_factory=list)
    own_code: bool = False  # attnviz.hf.readers's hooks record only into such a Recorder (an own-code family's trace)
    roles: dict = field(default_factory=dict)  # encoder-decoder: attention module -> encoder / decoder / cross
    masks: list = field(default_factory=list)  # (the dense mask seen, its structure) of the latest distinct masks
    outputs: dict = field(default_factory=dict)  # attention module -> OutputProjection (attnviz.hf.output_projection)
    value_widths: list = field(default_factory=list)  # each call's value width (None: no values seen), for the load
    values_left_out: str | None = None  # why this trace keeps no values (attnviz.hf.capacity.values_left_out)

    def position(self, module) -> tuple[str | None, int]:
        """(part, layer within the part) of the attention call `module` is making now; (None, call index) for a
        model with one kind of attention."""
        role = self.roles.get(module)
        if role is None:
            return None, len(self.layers)
        return role, sum(self.roles.get(m) == role for m in self.modules)

    def structure(self, allowed, query, key) -> StructuredMask:
        """Batch item 0's mask by its structure, recognised once per distinct mask: layers that get the same mask
        (transformers builds one per kind of layer) share one StructuredMask."""
        n_q, n_k = query.shape[-2], key.shape[-2]
        if allowed is None:
            return StructuredMask(n_q, n_k, query.device)
        mask = allowed.expand(query.shape[0], 1, n_q, n_k)[0, 0]  # [query, key]
        for seen, found in self.masks:  # a view of the very same cells (each layer slices the model's mask anew)
            same_view = seen.data_ptr() == mask.data_ptr() and seen.stride() == mask.stride()
            if seen.shape == mask.shape and seen.device == mask.device and (same_view or torch.equal(seen, mask)):
                return found
        found = recognise(mask)
        self.masks = [*self.masks[-1:], (mask, found)]  # the two latest: local and global layers may alternate
        return found

    def keep(self, module, query, key, scale: float, allowed, fill: float, extra: dict, scale_on: ScaleOn = "scores",
             norms=None, value=None, no_values: str = OWN_CODE_VALUES) -> None:  # fmt: skip
        """Record batch item 0 of one attention call, its mask by structure (`structure`).

        allowed: a StructuredMask, or the boolean mask [batch or 1, 1, query, key] (None: all visible). extra: bias
        ([batch or 1, head or 1, query, key]), softcap and sinks, each None when the model has none. scale_on: where
        the model applied the scale ("scores", "q", "k", "q and k"; see LayerRecord). norms: the row norms the kernel
        gave (None: the record computes them). value: [batch, kv_head, key, d_value], kept with what each head writes
        from each key (`written`) when the module's output projection is known; else no_values says why there is none.
        """
        n_q, n_k = query.shape[-2], key.shape[-2]
        mask = allowed if isinstance(allowed, StructuredMask) else self.structure(allowed, query, key)
        bias = extra["bias"]
        bias = None if bias is None else bias.expand(query.shape[0], -1, n_q, n_k)[0]
        sinks = extra["sinks"]
        if sinks is not None:  # [head] for every query, or [batch, head, query]: one per query
            sinks = (
                sinks.detach().reshape(-1) if sinks.dim() <= 1 else sinks.detach().expand(query.shape[0], -1, n_q)[0]
            )
        proj = self.outputs.get(module)
        values, no_values = None, self.values_left_out or no_values
        if value is not None and proj is not None and self.values_left_out is None:
            values = Values(value[0], output_norms.table(value[0], proj.r_factors(query.shape[1], value.device)))
        record = LayerRecord(query[0], key[0], scale, mask, fill, bias, softcap=extra["softcap"], sinks=sinks,
                             scale_on=scale_on, norms=norms, values=values, no_values=no_values)  # fmt: skip
        self.layers.append(record)
        self.modules.append(module)
        self.value_widths.append(None if value is None else int(value.shape[-1]))


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


def apply_experiment(rec: Recorder, layer: int, allowed, scale: float, n_q: int, n_k: int, device, role=None):
    """(allowed, scale, fill, changed) after this forward pass's experiment at `layer` of part `role`.

    changed=False when the experiment leaves this layer's result as it was (a mask the model already had, its
    own scale, a fill that no fully masked row ever sees): the layer then runs the model's own kernel.
    """
    exp, before = rec.experiment, allowed
    if exp.applies_to(layer, role):
        if exp.causal:
            allowed = _and(allowed, causal_mask(n_q, n_k, device=device))
        if exp.hide:
            visible = torch.ones(n_k, dtype=torch.bool, device=device)
            visible[list(exp.hide)] = False
            allowed = _and(allowed, visible)
        new_scale = scale if exp.scale is None else exp.scale
        fill = DEFAULT_FILL if exp.fill is None else exp.fill
    elif not exp.pad_mask and rec.pad_keys is not None and role != "decoder":  # the others keep the padding mask
        allowed, new_scale, fill = _and(allowed, ~rec.pad_keys.to(device)), scale, DEFAULT_FILL
    else:
        return allowed, scale, DEFAULT_FILL, False
    mask_changed = allowed is not before and not (before is not None and torch.equal(allowed, before))
    dead_rows = allowed is not None and bool((~allowed).all(-1).any())
    changed = mask_changed or new_scale != scale or (fill != DEFAULT_FILL and dead_rows)
    return allowed, new_scale, fill, changed


def _and(allowed: torch.Tensor | None, extra: torch.Tensor) -> torch.Tensor:
    return extra if allowed is None else allowed & extra


def capture_attention(
    module, query, key, value, attention_mask, scaling=None, dropout=0.0, position_bias=None, softcap=None, s_aux=None,
    sinks=None, **kwargs,
):  # fmt: skip
    """Attention as the model computes it, recording q, k, scale, mask, fill, bias, softcap and sinks of every call.

    position_bias (T5) is added to the scaled scores, softcap (Gemma 2) caps them with tanh, s_aux (gpt-oss) holds
    one sink logit per head and sinks (Inkling 2) one per query that joins the softmax; every other argument is
    checked by `check_arguments`. A scale the module folded into q (OPT, ESM) is divided out again (`unscaled`).
    """
    attention_mask = _select_keys(attention_mask, kwargs.pop("indices", None), key.shape[-2])
    check_arguments(kwargs)
    rec = _CAPTURE.get()
    scale = query.shape[-1] ** -0.5 if scaling is None else float(scaling)
    given = (query, key)  # what the model's own kernel gets
    query, key, scale, scale_on = unscaled(module, query, key, scale)
    n_q, n_k = query.shape[-2], key.shape[-2]
    allowed, bias = split_mask(attention_mask, n_k)
    if position_bias is not None:
        bias = position_bias if bias is None else position_bias + bias
    extra = dict(bias=bias, softcap=None if softcap is None else float(softcap), sinks=_sinks(s_aux, sinks, query))
    changed, fill, structure, norms = False, DEFAULT_FILL, None, None
    if rec is not None:
        role, layer = rec.position(module)
        allowed, scale, fill, changed = apply_experiment(rec, layer, allowed, scale, n_q, n_k, query.device, role)
        structure = rec.structure(allowed, query, key)
    own_kernel = not changed and softcap is None and extra["sinks"] is None
    if own_kernel and structure is not None and fill in (DEFAULT_FILL, -math.inf) and extra["bias"] is None and (
        kernels.fusable(structure, query, value, module, dropout)
    ):  # fmt: skip
        out, norms = kernels.fused(*given, value, scaling, structure.causal)
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


def call_kwargs(model) -> dict:
    """Keyword arguments every forward pass gets: no key/value cache (one pass over the whole text)."""
    params = inspect.signature(model.forward).parameters
    return {"use_cache": False} if "use_cache" in params else {}


@contextlib.contextmanager
def recording(rec: Recorder):
    """`rec` is this thread's capture state inside the block (the seam and attnviz.hf.readers's hooks record into it)."""
    token = _CAPTURE.set(rec)
    try:
        yield rec
    finally:
        _CAPTURE.reset(token)


def current() -> Recorder | None:
    """This thread's capture state, None outside `recording`."""
    return _CAPTURE.get()


_LENT: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # a user's model -> (attnviz's implementation, theirs)


def lend(model, ours: str, theirs: str | None) -> None:
    """A user's own model (attnviz.from_model) runs `ours` only inside attnviz's forward passes and `theirs` between
    them, so its own output_attentions keeps working. A notebook's model is used by one thread at a time; the app's
    cached models are attnviz's own and never lent."""
    if theirs is None or theirs == ours:
        return
    _LENT[model] = (ours, theirs)
    model.set_attn_implementation(theirs)


@contextlib.contextmanager
def _borrowed(model):
    """`model` on attnviz's implementation inside the block when it is a lent user's model."""
    lent = _LENT.get(model)
    if lent is None:
        yield
        return
    model.set_attn_implementation(lent[0])
    try:
        yield
    finally:
        model.set_attn_implementation(lent[1])


def forward(model, inputs: dict, rec: Recorder):
    """One forward pass with `rec` as this thread's capture state.

    Whatever the model raises becomes an InputError (CaptureRefused passes through for the caller to explain).
    """
    with recording(rec), _borrowed(model):
        try:
            with torch.inference_mode():
                return model(**inputs, **call_kwargs(model))
        except (CaptureRefused, InputsRead):
            raise
        except Exception as e:  # noqa: BLE001 - only attnviz's own errors may reach a user
            raise _failed(model, e) from None


def forward_eager(model, inputs: dict) -> tuple:
    """One forward pass of an eager-attention model returning its attention weights, [batch, head, q, k] per layer."""
    try:
        with torch.inference_mode(), _borrowed(model):
            out = model(**inputs, output_attentions=True, **call_kwargs(model))
    except CaptureRefused:
        raise
    except Exception as e:  # noqa: BLE001 - only attnviz's own errors may reach a user
        raise _failed(model, e) from None
    return getattr(out, "attentions", None) or ()


def _failed(model, err: Exception) -> InputError:
    if isinstance(err, torch.OutOfMemoryError):
        return InputError("The model ran out of memory on this text: try a shorter text or a smaller model.")
    kind = getattr(model.config, "model_type", type(model).__name__)
    return InputError(f"The {kind} model failed on this text ({first_line(err, named=True)}).")
