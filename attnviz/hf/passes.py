"""One forward pass of a model with attnviz's capture state, or with eager attention for its weights; a user's own
model lent attnviz's attention implementation only for the pass."""

from __future__ import annotations

import contextlib
import inspect
import weakref

import torch

from ..errors import InputError, first_line
from .recorder import CaptureRefused, InputsRead, Recorder, recording


def call_kwargs(model) -> dict:
    """Keyword arguments every forward pass gets: no key/value cache (one pass over the whole text)."""
    return {"use_cache": False} if _takes_use_cache(model.forward) else {}


_TAKES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # a forward function -> whether it takes use_cache


def _takes_use_cache(forward) -> bool:
    """Whether `forward` (a bound method) takes use_cache, read from its signature once per function (a corpus
    profile runs thousands of forwards; inspecting a signature is most of a millisecond)."""
    fn = getattr(forward, "__func__", None)
    if fn is None:  # not a plain bound method: read it every time
        return "use_cache" in inspect.signature(forward).parameters
    if fn not in _TAKES:
        _TAKES[fn] = "use_cache" in inspect.signature(forward).parameters
    return _TAKES[fn]


_OURS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # a model -> the implementation attnviz traces it with


def lend(model, ours: str, theirs: str | None = None) -> None:
    """attnviz's forward passes of `model` run the attention implementation `ours`, whatever the model runs between
    them: `theirs` for a user's own model (attnviz.from_model), so that its own output_attentions keeps working, or
    whatever its user switches it to later (`loaded.model.set_attn_implementation("sdpa")` would otherwise hide every
    attention call from the capture). A notebook's model is used by one thread at a time; the app's cached models are
    attnviz's own and never switched."""
    _OURS[model] = ours
    if theirs is not None and theirs != ours:
        model.set_attn_implementation(theirs)


@contextlib.contextmanager
def _borrowed(model):
    """`model` on attnviz's implementation inside the block, back on the one it had after it."""
    ours = _OURS.get(model)
    theirs = model.config._attn_implementation  # read only; transformers' own docs read it, no public getter exists
    if ours is None or theirs == ours:
        yield
        return
    model.set_attn_implementation(ours)
    try:
        yield
    finally:
        model.set_attn_implementation(theirs)


def forward(model, inputs: dict, rec: Recorder):
    """One forward pass with `rec` as this thread's capture state; None when it ended early, everything it was for
    read (InputsRead: the recorder's last attention call, or a hook that read its inputs).

    Whatever the model raises becomes an InputError (CaptureRefused passes through for the caller to explain).
    """
    with recording(rec), _borrowed(model):
        try:
            with torch.inference_mode():
                return model(**inputs, **call_kwargs(model))
        except InputsRead:
            return None
        except CaptureRefused:
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
