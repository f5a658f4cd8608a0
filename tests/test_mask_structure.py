"""Masks kept by structure and the row log-sum-exp: equal, cell for cell, to the dense mask and to a numpy softmax.

The expected values are written here in numpy (np.tril, np.where, scipy's logsumexp, a float64 softmax over each full
row) and share no code with attnviz.trace.mask or attnviz.trace.row_norms.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from oracle import np_softmax
from scipy.special import logsumexp

from attnviz import DEFAULT_FILL, AttentionTrace
from attnviz.trace import layers as trace_layers
from attnviz.trace.layers import LayerRecord
from attnviz.trace.mask import recognise

N = 13


def _band(n_q, n_k, ahead=None, behind=None, keys=None):
    i, j = np.arange(n_q)[:, None], np.arange(n_k)[None, :]
    m = np.ones((n_q, n_k), bool)
    if ahead is not None:
        m &= j - i <= ahead
    if behind is not None:
        m &= i - j <= behind
    return m if keys is None else m & keys


PAD_RIGHT = np.arange(N) < 9
PAD_LEFT = np.arange(N) >= 3
HIDE = ~np.isin(np.arange(N), [2, 5])
MASKS = {
    "all": (np.ones((N, N), bool), "all"),
    "causal": (np.tril(np.ones((N, N), bool)), "causal"),
    "padded right": (np.broadcast_to(PAD_RIGHT, (N, N)), "other"),
    "causal, padded left": (np.tril(np.ones((N, N), bool)) & PAD_LEFT, "other"),
    "sliding window 4, padded left": (_band(N, N, 0, 3, PAD_LEFT), "other"),
    "symmetric window": (_band(N, N, 2, 2), "other"),
    "hidden keys": (np.tril(np.ones((N, N), bool)) & HIDE, "other"),
    "cross, padded": (np.broadcast_to(np.arange(7) < 5, (N, 7)), "other"),
    "no key at all": (np.zeros((N, N), bool), "other"),
}


@pytest.mark.parametrize("name", MASKS)
def test_a_structured_mask_equals_the_dense_one_in_every_window_and_column(name):
    dense, kind = MASKS[name]
    s = recognise(torch.from_numpy(dense.copy()))
    assert s.kind == kind and not s.is_dense and s.flips is None
    np.testing.assert_array_equal(s.dense().numpy(), dense)
    np.testing.assert_array_equal(s.rows(slice(3, 8), slice(1, 6)).numpy(), dense[3:8, 1:6])
    for key in range(dense.shape[1]):
        np.testing.assert_array_equal(s.column(key).numpy(), dense[:, key])
    assert s.nbytes <= dense.shape[1]  # at most a bool per key: nothing grows with query x key
    lo, hi = s.key_span(slice(4, 6))
    assert not dense[4:6, :lo].any() and not dense[4:6, hi:].any()  # the span holds every visible key of the rows


def test_the_structure_names_what_it_found():
    window = recognise(torch.from_numpy(_band(N, N, 0, 3, PAD_LEFT)))
    assert window.causal and window.window == 4 and window.keys.numpy().tolist() == PAD_LEFT.tolist()
    assert recognise(torch.from_numpy(np.tril(np.ones((N, N), bool)))).causal


def test_a_few_odd_cells_are_kept_as_exceptions_and_a_mask_without_structure_stays_dense():
    odd = np.tril(np.ones((N, N), bool))
    odd[2, 9] = True
    odd[10, 4] = False
    s = recognise(torch.from_numpy(odd))
    assert s.causal and s.flips.numel() == 2
    np.testing.assert_array_equal(s.dense().numpy(), odd)
    np.testing.assert_array_equal(s.rows(slice(2, 11), slice(4, 10)).numpy(), odd[2:11, 4:10])
    custom = np.random.default_rng(0).random((N, N)) < 0.5
    s = recognise(torch.from_numpy(custom))
    assert s.is_dense and s.kind == "other"
    np.testing.assert_array_equal(s.dense().numpy(), custom)
    np.testing.assert_array_equal(s.column(3).numpy(), custom[:, 3])


def _numpy_rows(q, k, scale, mask, fill, bias=None, softcap=None, sinks=None):
    """(masked [head, query, key], full rows with a sink column when there are sinks) in float64."""
    scaled = np.einsum("hqd,hkd->hqk", q, k) * scale
    if bias is not None:
        scaled = scaled + bias
    if softcap is not None:
        scaled = np.tanh(scaled / softcap) * softcap
    masked = np.where(mask, scaled, fill)
    rows = (
        masked
        if sinks is None
        else np.concatenate([masked, np.broadcast_to(sinks[:, None, None], (*masked.shape[:2], 1))], -1)
    )
    return masked, rows


CASES = {  # name: (mask, fill, extras)
    "causal": (np.tril(np.ones((N, N), bool)), DEFAULT_FILL, {}),
    "window, padded left, dead rows": (_band(N, N, 0, 2, PAD_LEFT), DEFAULT_FILL, {}),
    "dead rows, -inf fill": (np.tril(np.ones((N, N), bool)) & PAD_LEFT, -np.inf, {}),
    "window, small fill": (_band(N, N, 0, 2), -3.0, {}),
    "bias and softcap": (np.broadcast_to(PAD_RIGHT, (N, N)), DEFAULT_FILL, {"bias": True, "softcap": 2.0}),
    "sinks, window": (_band(N, N, 0, 3), DEFAULT_FILL, {"sinks": True}),
    "custom": (np.random.default_rng(1).random((N, N)) < 0.4, DEFAULT_FILL, {}),
}


@pytest.mark.parametrize("name", CASES)
def test_the_row_lse_and_windows_from_it_equal_a_numpy_softmax_of_the_full_rows(name, monkeypatch):
    monkeypatch.setattr(trace_layers, "NORM_CELLS", 40)  # a few rows per step, as a long text has
    mask, fill, extras = CASES[name]
    g = torch.Generator().manual_seed(3)
    q, k = torch.randn(4, N, 8, generator=g) * 2, torch.randn(2, N, 8, generator=g)  # 2 query heads per key head
    bias = torch.randn(4, N, N, generator=g) if extras.get("bias") else None
    sinks = torch.randn(4, generator=g) if extras.get("sinks") else None
    record = LayerRecord(
        q, k, 0.4, torch.from_numpy(mask.copy()), fill, bias, softcap=extras.get("softcap"), sinks=sinks
    )
    trace = AttentionTrace([f"t{i}" for i in range(N)], (record,))
    k_shared = np.repeat(k.double().numpy(), 2, axis=0)
    masked, rows = _numpy_rows(q.double().numpy(), k_shared, 0.4, mask, fill, None if bias is None else bias.double().numpy(),
                               extras.get("softcap"), None if sinks is None else sinks.double().numpy())  # fmt: skip
    live = np.isfinite(rows).any(-1)
    np.testing.assert_allclose(trace.lse(0)[live], logsumexp(rows, -1)[live], rtol=1e-5, atol=1e-5)
    expected = np_softmax(rows)[..., :N]
    for key in (0, 4, N - 1):
        np.testing.assert_allclose(trace.column(0, key), expected[..., key], rtol=0, atol=2e-6)
    part = trace.stages(0, heads=[3, 0], queries=(2, 11), keys=(3, 8))
    np.testing.assert_allclose(part.weights, expected[[3, 0], 2:11, 3:8], rtol=0, atol=2e-6)
    np.testing.assert_allclose(part.masked, masked[[3, 0], 2:11, 3:8].astype(np.float32), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(trace.layer_mask(0, (2, 11), (3, 8)), mask[2:11, 3:8])


@pytest.mark.parametrize("name", ["causal", "window, padded left, dead rows", "custom"])
def test_each_block_of_the_row_norms_stays_within_its_cells(name):
    # a causal band's first row reaches one key and its last row every key: sizing a block by its first row alone
    # once asked a GPU for 128 GiB at 32,768 tokens (32 heads x every row x every key)
    mask = recognise(torch.from_numpy(CASES[name][0].copy()))
    n_head, cells = 4, 40
    blocks = list(trace_layers.norm_blocks(mask, n_head, N, cells))
    assert [r.start for r, _ in blocks] == [0] + [r.stop for r, _ in blocks[:-1]] and blocks[-1][0].stop == N
    for rows, keys in blocks:
        lo, hi = mask.key_span(rows)
        assert (keys.start, keys.stop) == (lo, hi)
        assert n_head * (rows.stop - rows.start) * (hi - lo) <= cells or rows.stop - rows.start == 1
    if name == "causal":
        assert len(blocks) < N  # blocks, not rows one by one
