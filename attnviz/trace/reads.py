"""How an AttentionTrace answers a read: checked heads and windows, float32 numpy out, sizes.

The trace's methods (`stages`, `column`, ...) are the public read path; these are the pieces they share, so the
record itself stays a short list of fields and one-line answers.
"""

from __future__ import annotations

import itertools

import numpy as np
import torch

from .. import checks
from ..attention import Stages
from ..errors import ArgumentError, InputError, check_index


def head_index(heads, n_head: int, name: str = "heads", single: bool = False) -> torch.Tensor:
    """Heads as a LongTensor: None = every head, an int = that one (its axis kept), or a sequence of heads."""
    if heads is None and not single:
        return torch.arange(n_head)
    if single or isinstance(heads, (str, bytes)) or not hasattr(heads, "__iter__") or getattr(heads, "ndim", 1) == 0:
        return torch.tensor([check_index(name, heads, n_head)], dtype=torch.long)
    picked = list(itertools.islice(iter(heads), n_head + 1))  # range(10**7) is never read whole
    if len(picked) > n_head:
        raise ArgumentError(name, f"{name} lists more than the {n_head} heads there are.")
    if not picked:
        raise InputError("Choose at least one head.")
    return torch.tensor([check_index(name, h, n_head) for h in picked], dtype=torch.long)


def span(name: str, window, n: int) -> slice:
    """A (start, stop) window of `name` (queries or keys) as a slice, cut to the n positions there are (as slicing
    does); None = all n. An InputError when nothing is left of it."""
    window = checks.window(name, window, n)
    if window is None:
        return slice(None)
    start, stop = max(0, window[0]), min(n, window[1])
    if start >= stop:
        raise InputError(f"The {name} window {window[0]}..{window[1]} holds none of the {n} positions.")
    return slice(None) if (start, stop) == (0, n) else slice(start, stop)


def what_if(mask, fill, shape: tuple[int, int]):
    """(mask, fill) of a what-if read: a [query, key] mask of `shape` as bool (None: the layer's own), a fill that is a
    number or -inf (None: the layer's own)."""
    if mask is not None:
        mask = checks.array("mask", mask, (2,), finite=False) != 0
        if tuple(mask.shape) != shape:
            raise ArgumentError("mask", f"mask must be [query, key] = {shape}, not {tuple(mask.shape)}.")
    return mask, checks.number("fill", fill, minus_inf=True, none=True)


def frozen(t: torch.Tensor | None) -> np.ndarray | None:
    """A float32 tensor as a read-only numpy array (no copy when it is already on the CPU); None stays None."""
    if t is None:
        return None
    a = t.detach().to("cpu", torch.float32).numpy()
    a.setflags(write=False)
    return a


def frozen_mask(t: torch.Tensor) -> np.ndarray:
    """A bool tensor as a read-only numpy array."""
    a = t.detach().cpu().numpy()
    a.setflags(write=False)
    return a


def frozen_stages(stages: Stages) -> Stages:
    return Stages(*(frozen(s) for s in stages))


def held_bytes(tensors) -> int:
    """Bytes of the distinct storages behind `tensors`: views of one buffer (a mask or bias shared by every
    layer, q and k cut from one projection) count once, and so does what a view keeps alive."""
    storages = {}
    for t in tensors:
        st = t.untyped_storage()
        storages[(t.device, st.data_ptr())] = st.nbytes()
    return sum(storages.values())


def stacked(arrays: list) -> np.ndarray | None:
    """[layer, ...] from one array per layer, read-only; None when a layer has none."""
    if any(a is None for a in arrays):
        return None
    out = np.stack(arrays)
    out.setflags(write=False)
    return out


def token_ids(ids, n: int, what: str) -> tuple | None:
    """Per-token ids from the tokenizer (word or sequence ids; None entries for special tokens and padding) checked
    against the number of tokens; None stays None (the trace falls back to marker rules)."""
    if ids is None:
        return None
    ids = tuple(None if i is None else int(i) for i in ids)
    if len(ids) != n:
        raise InputError(f"{len(ids)} {what} for {n} tokens.")
    return ids
