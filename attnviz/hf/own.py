"""Families that compute attention in their own code (BLOOM, MPT): every stage, read from what each layer is given.

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
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

import torch

from ..attention import DEFAULT_FILL
from . import capture


class Call(NamedTuple):
    """One attention call as the module computes it: q, k [batch, head, seq, head_dim], scale, allowed (bool,
    broadcasts to [batch, 1, query, key]) or None, fill, bias ([batch or 1, head or 1, query or 1, key]) or None."""

    q: torch.Tensor
    k: torch.Tensor
    scale: float
    allowed: torch.Tensor | None
    fill: float
    bias: torch.Tensor | None


@dataclass(frozen=True)
class Reproducer:
    """How one family computes attention in its own code: `read` turns a module's call arguments into a Call."""

    family: str
    read: Callable[[torch.nn.Module, dict], Call]


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


#: Attention module classes (module path and class name) whose own code attnviz reproduces.
REPRODUCERS = {
    "transformers.models.bloom.modeling_bloom.BloomAttention": Reproducer("BLOOM", bloom),
    "transformers.models.mpt.modeling_mpt.MptAttention": Reproducer("MPT", mpt),
}

_HOOKS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # module -> its hook handle (never hooked twice)


def reproducer_of(module) -> Reproducer | None:
    return REPRODUCERS.get(f"{type(module).__module__}.{type(module).__qualname__}")


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
        rec.keep(module, call.q, call.k, call.scale, call.allowed, call.fill, extra)
        return None

    return hook


def install(model, checks: list[dict]) -> tuple[list, str]:
    """Hook the attention modules of a family in REPRODUCERS and check the records against the model's own weights
    on every input of `checks`.

    Returns (attention modules in call order, "") when every check holds; ([], note) when the family is known but
    its reproduction failed (hooks removed, weights only); ([], "") for any other family.
    """
    modules = [m for m in model.modules() if reproducer_of(m) is not None]
    if not modules:
        return [], ""
    for m in modules:
        if m not in _HOOKS:
            _HOOKS[m] = m.register_forward_pre_hook(recording_hook(reproducer_of(m).read), with_kwargs=True)
    order, problem = [], ""
    for inputs in checks:
        try:
            order, problem = check(model, inputs)
        except Exception as e:  # noqa: BLE001 - any failure means the stages cannot be trusted
            order, problem = [], f"{type(e).__name__}: {(str(e).splitlines() or [''])[0][:160]}"
        if problem:
            break
    if not problem:
        return order, ""
    for m in modules:
        _HOOKS.pop(m).remove()
    family = reproducer_of(modules[0]).family
    return [], f"attnviz's reading of {family} attention did not match the model's own weights ({problem})"


def check(model, inputs: dict) -> tuple[list, str]:
    """(modules in call order, "") when the weights computed from the records equal the model's, else ([], what)."""
    rec = capture.Recorder(own_code=True)
    with capture.recording(rec):
        attentions = [a for a in capture.forward_eager(model, inputs) if a is not None]
    if len(attentions) != len(rec.layers):
        return [], f"{len(rec.layers)} layers recorded, {len(attentions)} returned"
    tolerance = 1e-4 if attentions and attentions[0].dtype == torch.float32 else 3e-2
    with torch.inference_mode():
        worst = max(
            ((r.stages().weights.float() - a[0].float()).abs().max().item() for r, a in zip(rec.layers, attentions)),
            default=float("inf"),
        )
    if not worst <= tolerance:
        return [], f"weights differ by up to {worst:.1e}"
    return list(rec.modules), ""
