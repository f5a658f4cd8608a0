"""Attention weights a model already returned (transformers' `output_attentions=True`) as one float32 array.

Whatever transformers hands back is taken as it is: a tuple or list with one tensor per layer (or one stacked
array), tensors that still require grad, bfloat16 or float16, on any device, tensor subclasses, numpy arrays.
What holds no weights (SDPA's empty tuple, None, the meta device) is refused with the reason and what to do.
"""

from __future__ import annotations

import numpy as np
import torch

from .. import checks
from ..errors import InputError

NO_ATTENTIONS = (
    "from_attentions got no attention weights ({what}). Only eager attention returns them: with transformers' "
    "default (sdpa), output_attentions=True gives an empty tuple. "
    'Load the model with attn_implementation="eager" (AutoModel.from_pretrained(name, '
    'attn_implementation="eager")) and call it with output_attentions=True, or let attnviz run it: '
    "attnviz.trace(attnviz.from_model(model, tokenizer), text) records every stage."
)


def weights_array(attentions, item: int = 0) -> np.ndarray:
    """[layer, head, query, key] float32 weights of batch item `item`, from one [batch, head, query, key]
    (or [head, query, key]) tensor per layer."""
    item = checks.whole("item", item, low=0, high=2**31)
    layers = [_one_layer(a, i, item) for i, a in enumerate(_layers(attentions))]
    shapes = {a.shape for a in layers}
    if len(shapes) > 1:
        raise InputError(f"from_attentions needs every layer in one shape [head, query, key]; got {sorted(shapes)}.")
    return np.stack(layers)


def _layers(attentions) -> list:
    """One entry per layer, or an InputError saying why there are none."""
    if attentions is None:
        raise InputError(NO_ATTENTIONS.format(what="None"))
    if isinstance(attentions, (torch.Tensor, np.ndarray)):  # already stacked: [layer, batch, head, query, key]
        if attentions.ndim != 5:
            raise InputError(
                f"from_attentions takes one [batch, head, query, key] tensor per layer (a tuple or list) or one "
                f"[layer, batch, head, query, key] array; got an array of shape {tuple(attentions.shape)}."
            )
        return list(attentions)
    try:
        layers = list(attentions)
    except TypeError:
        raise InputError(
            f"from_attentions takes a tuple or list of tensors, one per layer; got {type(attentions).__name__}."
        ) from None
    if not layers:
        raise InputError(NO_ATTENTIONS.format(what="an empty tuple"))
    missing = [i for i, a in enumerate(layers) if a is None]
    if missing:
        raise InputError(NO_ATTENTIONS.format(what=f"None for layers {missing}"))
    return layers


def _one_layer(a, layer: int, item: int) -> np.ndarray:
    """[head, query, key] float32 on the host: gradients dropped, any dtype, any device, any tensor subclass."""
    try:
        t = a if isinstance(a, torch.Tensor) else torch.as_tensor(np.asarray(a, dtype=np.float32))
    except (TypeError, ValueError) as e:
        raise InputError(
            f"attentions: layer {layer}'s attention is not an array of numbers ({type(a).__name__}: {e})."
        ) from None
    if t.device.type == "meta":
        raise InputError(f"layer {layer}'s attention is on the meta device, which holds shapes but no values.")
    if t.dim() == 4:
        if not -t.shape[0] <= item < t.shape[0]:
            raise InputError(f"batch item {item} does not exist: layer {layer} holds {t.shape[0]} items.")
        t = t[item]
    if t.dim() != 3:
        raise InputError(
            f"layer {layer}'s attention has shape {tuple(t.shape)}; expected [batch, head, query, key] "
            "or [head, query, key]."
        )
    # a subclass (a parameter wrapper, a logging tensor) becomes a plain tensor before leaving torch
    t = t.detach().to(device="cpu", dtype=torch.float32).as_subclass(torch.Tensor)
    return np.array(t.numpy(), dtype=np.float32)
