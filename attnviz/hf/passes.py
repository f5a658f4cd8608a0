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
    params = inspect.signature(model.forward).parameters
    return {"use_cache": False} if "use_cache" in params else {}


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
