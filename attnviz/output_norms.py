"""How much each head writes from each key: ||v[h, j] @ W_O[h]||, the size of what head h at any query takes from key j
per unit of weight, in the residual stream (Kobayashi et al. 2020, "Attention is not only a weight").

W_O[h] is the slice of the output projection's input that head h feeds ([d_head, d_model]). Since
||weight * v @ W_O[h]|| = |weight| * ||v @ W_O[h]||, one [head, key] table per layer, computed once where the model
runs, turns any window of weights into value norms by one multiplication (attnviz.analysis.values). The table is
computed while tracing, so a trace holds a [head, key] table and the values, never a copy of the output projection.
The output projection's bias is left out, as Kobayashi et al. do: it is the same for every key.
"""

from __future__ import annotations

import torch


def head_slices(weight: torch.Tensor, n_head: int, inputs_first: bool = False) -> torch.Tensor:
    """W_O as [head, d_head, d_model] (a view, float32 only when it is already): the rows of v @ W_O each head feeds.

    weight: the output projection's weight, (out, in) as torch.nn.Linear keeps it, or (in, out) when `inputs_first`
    (GPT-2's Conv1D); the input is the heads' outputs side by side, head 0 first."""
    w = weight if inputs_first else weight.T  # [in, out]
    return w.reshape(n_head, w.shape[0] // n_head, w.shape[1])


def table(v: torch.Tensor, w_o: torch.Tensor) -> torch.Tensor:
    """[head, key] float32: ||v[kv(h), j] @ w_o[h]|| for every query head h (kv(h) = h // (head / kv_head), the key
    and value head it shares, as transformers' repeat_kv does). v: [kv_head, key, d_head]; w_o: head_slices(...).

    w_o[h] = R^T Q^T (QR of its transpose; Q's columns orthonormal), so ||v @ w_o[h]|| = ||v @ R^T||: d_head x d_head
    per head instead of d_head x d_model, about d_model / d_head times less work than the projection itself, and
    without squaring anything (no loss of precision to a Gram matrix)."""
    n_head, d_head, _ = w_o.shape
    if v.shape[-1] != d_head or n_head % v.shape[0]:
        raise ValueError(f"values {tuple(v.shape)} do not fit an output projection of {n_head} heads x {d_head}")
    r = torch.linalg.qr(w_o.detach().to(v.device, torch.float32).transpose(-1, -2), mode="r").R  # [head, d, d]
    kv = torch.arange(n_head, device=v.device) // (n_head // v.shape[0])
    return torch.linalg.vector_norm(v[kv].float() @ r.transpose(-1, -2), dim=-1)
