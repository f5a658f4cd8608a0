"""An independent numpy implementation of multi-head attention, used as a test oracle.

Written the way seeds 001 and 003 write it (numpy, batch and heads folded into one axis,
valid lengths as the padding mask, PyTorch's packed in_proj layout), and sharing no code with
`attnviz.attention`, so that agreement between the two means something.
"""

from __future__ import annotations

import numpy as np


def np_softmax(x: np.ndarray) -> np.ndarray:
    """Stable softmax on the last axis; a row that is all -inf gives zeros (attnviz's convention)."""
    m = np.max(x, axis=-1, keepdims=True)
    m = np.where(np.isneginf(m), 0.0, m)
    e = np.exp(x - m)
    s = e.sum(axis=-1, keepdims=True)
    return e / np.where(s == 0, 1.0, s)


def np_multihead(
    queries: np.ndarray,
    keys: np.ndarray,
    values: np.ndarray,
    w_q: np.ndarray,
    w_k: np.ndarray,
    w_v: np.ndarray,
    w_o: np.ndarray,
    n_head: int,
    b_q=None,
    b_k=None,
    b_v=None,
    b_o=None,
    valid_lens: np.ndarray | None = None,
    mask: np.ndarray | None = None,
    fill: float = -np.inf,
    scale: float | None = None,
):
    """Batch-first multi-head attention in float64.

    queries [B, Tq, d], keys/values [B, Tk, d]; weights in torch's (out, in) layout, so x @ w.T.
    mask: boolean [.., Tq, Tk] broadcastable to [B, nh, Tq, Tk], True = may attend.
    Returns (output [B, Tq, d], weights [B, nh, Tq, Tk]).
    """
    B, Tq, d = queries.shape
    Tk = keys.shape[1]
    assert d % n_head == 0, "d_model must be divisible by n_head"
    hd = d // n_head

    def proj(x, w, b):
        y = x.astype(np.float64) @ w.astype(np.float64).T
        return y if b is None else y + b

    def fold(x):  # [B, T, d] -> [B*nh, T, hd]
        T = x.shape[1]
        return x.reshape(B, T, n_head, hd).transpose(0, 2, 1, 3).reshape(B * n_head, T, hd)

    Q, K, V = fold(proj(queries, w_q, b_q)), fold(proj(keys, w_k, b_k)), fold(proj(values, w_v, b_v))
    scale = 1.0 / np.sqrt(hd) if scale is None else scale
    scores = Q @ K.transpose(0, 2, 1) * scale  # [B*nh, Tq, Tk]
    allowed = np.ones((B, n_head, Tq, Tk), dtype=bool)
    if valid_lens is not None:
        vl = np.asarray(valid_lens)
        vl = np.repeat(vl[:, None], Tq, axis=1) if vl.ndim == 1 else vl  # [B, Tq]
        allowed &= (np.arange(Tk)[None, None, :] < vl[:, :, None])[:, None]
    if mask is not None:
        allowed &= np.broadcast_to(mask, allowed.shape)
    scores = np.where(allowed.reshape(B * n_head, Tq, Tk), scores, fill)
    weights = np_softmax(scores)
    out = (weights @ V).reshape(B, n_head, Tq, hd).transpose(0, 2, 1, 3).reshape(B, Tq, d)
    out = proj(out, w_o, b_o)
    return out, weights.reshape(B, n_head, Tq, Tk)


def np_packed_multihead(inputs: np.ndarray, n_head: int, in_proj_weight: np.ndarray, out_proj_weight: np.ndarray):
    """Seed 003's layout: inputs [T, B, d], in_proj_weight [3d, d] (q rows, then k, then v), no bias.

    Returns output [T, B, d] and weights [B, nh, T, T].
    """
    T, B, d = inputs.shape
    w_q, w_k, w_v = np.split(in_proj_weight, 3, axis=0)
    x = inputs.transpose(1, 0, 2)  # [B, T, d]
    out, weights = np_multihead(x, x, x, w_q, w_k, w_v, out_proj_weight, n_head)
    return out.transpose(1, 0, 2), weights
