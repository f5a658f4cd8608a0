"""How much each head writes from each key: ||v[h, j] @ W_O[h]||, the size of what head h at any query takes from key j
per unit of weight, in the residual stream (Kobayashi et al. 2020, "Attention is not only a weight").

W_O[h] is the slice of the output projection's input that head h feeds ([d_head, d_model]). Since
||weight * v @ W_O[h]|| = |weight| * ||v @ W_O[h]||, one [head, key] table per layer, computed once where the model
runs, turns any window of weights into value norms by one multiplication (attnviz.analysis.values). The table is
computed while tracing, so a trace holds a [head, key] table and the values, never a copy of the output projection.
The output projection's bias is left out, as Kobayashi et al. do: it is the same for every key.
"""

from __future__ import annotations

import functools
import threading
import weakref

import torch

from ..attention import expand_kv

_lock = threading.Lock()
_r_kept: dict[int, tuple] = {}  # id(weight) -> (weak reference to it, what R was computed from, R)


def head_slices(weight: torch.Tensor, n_head: int, inputs_first: bool = False) -> torch.Tensor:
    """W_O as [head, d_head, d_model] (a view, float32 only when it is already): the rows of v @ W_O each head feeds.

    weight: the output projection's weight, (out, in) as torch.nn.Linear keeps it, or (in, out) when `inputs_first`
    (GPT-2's Conv1D); the input is the heads' outputs side by side, head 0 first."""
    w = weight if inputs_first else weight.T  # [in, out]
    return w.reshape(n_head, w.shape[0] // n_head, w.shape[1])


def r_factors(weight: torch.Tensor, n_head: int, inputs_first: bool = False, device=None) -> torch.Tensor:
    """[head, d_head, d_head] float32 on `device` (the weight's by default): R of the QR of each head's W_O slice
    transposed (see `table`). Kept per weight tensor, since a model's output projection is the same for every trace:
    a weak reference, so the cache never keeps a model alive, and computed again when the weight changes (its
    version counter moves with every in-place write, load_state_dict included, and its storage with `.data =`)."""
    device = torch.device(device or weight.device)
    made_from = (weight._version, weight.data_ptr(), n_head, inputs_first, device)
    with _lock:
        ref, kept_from, r = _r_kept.get(id(weight), (None, None, None))
        if ref is not None and ref() is weight and kept_from == made_from:
            return r
    w_o = head_slices(weight.detach(), n_head, inputs_first).to(device, torch.float32)
    with torch.inference_mode():
        r = torch.linalg.qr(w_o.transpose(-1, -2), mode="r").R
    with _lock:
        _r_kept[id(weight)] = (weakref.ref(weight, functools.partial(_forget, id(weight))), made_from, r)
    return r


def _forget(key: int, _gone) -> None:
    """A weight went: so does its R (before its id can be reused)."""
    _r_kept.pop(key, None)


def table(v: torch.Tensor, r: torch.Tensor) -> torch.Tensor:
    """[head, key] float32: ||v[kv(h), j] @ w_o[h]|| for every query head h (kv(h) = h // (head / kv_head), the key
    and value head it shares, as transformers' repeat_kv does). v: [kv_head, key, d_head]; r: `r_factors` of W_O.

    w_o[h] = R^T Q^T (QR of its transpose; Q's columns orthonormal), so ||v @ w_o[h]|| = ||v @ R^T||: d_head x d_head
    per head instead of d_head x d_model, about d_model / d_head times less work than the projection itself, and
    without squaring anything (no loss of precision to a Gram matrix). R is [head, min(d_model, d_head), d_head]:
    square unless the model is narrower than a head (tiny test models can be)."""
    n_head, _, d_head = r.shape
    if v.shape[-1] != d_head or n_head % v.shape[0]:
        raise ValueError(f"values {tuple(v.shape)} do not fit an output projection of {n_head} heads x {d_head}")
    return torch.linalg.vector_norm(expand_kv(v, n_head).float() @ r.to(v.device).transpose(-1, -2), dim=-1)
