"""Recording from the families' own attention modules: a forward pre-hook per module, checked against the
model's own weights at load (see attnviz.hf.readers)."""

from __future__ import annotations

import inspect
import weakref

import torch

from ...errors import first_line
from .. import passes, recorder
from .table import reader_of

_HOOKS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # module -> its hook handle (never hooked twice)


def recording_hook(read):
    """A forward pre-hook that records the module's Call into this thread's Recorder (none outside `recording`)."""

    def hook(module, args, kwargs):
        rec = recorder.current()
        if rec is None or not rec.own_code:  # the seam's own probe and forwards of other kinds: not ours to record
            return None
        a = inspect.signature(module.forward).bind_partial(*args, **kwargs).arguments
        if any(a.get(name) is not None for name in ("layer_past", "past_key_values")):
            raise recorder.CaptureRefused("a key/value cache")
        if rec.experiment.changes_attention:
            raise recorder.CaptureRefused("an experiment this family's own attention code does not apply")
        call = read(module, a)
        extra = dict(bias=call.bias, softcap=None, sinks=None)
        rec.keep(module, call.q, call.k, call.scale, call.allowed, call.fill, extra, call.scale_on)
        return None

    return hook


def install(model, checks: list[dict]) -> tuple[recorder.Recorder | None, str]:
    """Hook the attention modules of a family in READERS and check the records against the model's own weights
    on every input of `checks`.

    Returns (the last check's Recorder: attention modules in call order, q and k per layer, "") when every check
    holds; (None, note) when the family is known but its reproduction failed (hooks removed, weights only); (None, "")
    for any other family.
    """
    modules = [m for m in model.modules() if reader_of(m) is not None]
    if not modules:
        return None, ""
    for m in modules:
        if m not in _HOOKS:
            _HOOKS[m] = m.register_forward_pre_hook(recording_hook(reader_of(m).read), with_kwargs=True)
    rec, problem = None, ""
    for inputs in checks:
        try:
            rec, problem = check(model, inputs)
        except Exception as e:  # noqa: BLE001 - any failure means the stages cannot be trusted
            rec, problem = None, first_line(e, 160, named=True)
        if problem:
            break
    if not problem:
        return rec, ""
    for m in modules:
        _HOOKS.pop(m).remove()
    family = reader_of(modules[0]).family
    return None, f"attnviz's reading of {family} attention did not match the model's own weights ({problem})"


def check(model, inputs: dict) -> tuple[recorder.Recorder | None, str]:
    """(the Recorder, "") when the weights computed from its records equal the model's, else (None, what).

    A family whose output_attentions gives the masked scores (Reader.returns) is compared on that stage."""
    rec = recorder.Recorder(own_code=True)
    with recorder.recording(rec):
        attentions = [a for a in passes.forward_eager(model, inputs) if a is not None]
    if len(attentions) != len(rec.layers):
        return None, f"{len(rec.layers)} layers recorded, {len(attentions)} returned"
    tolerance = 1e-4 if attentions and attentions[0].dtype == torch.float32 else 3e-2
    returns = [reader_of(m).returns for m in rec.modules]
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
