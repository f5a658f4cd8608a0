"""Each head's R factor of W_O (attnviz.trace.output_norms) is kept per weight tensor: reused by every trace, computed again
when the weight changes, and never keeping a model alive. Checked against ||v @ W_O[h]|| in numpy."""

from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest
import torch

import attnviz
from attnviz.trace import output_norms


def _numpy_table(v: torch.Tensor, weight: torch.Tensor, n_head: int) -> np.ndarray:
    """||v[h] @ W_O[h]|| with W_O[h] the rows of weight.T head h feeds (torch.nn.Linear keeps (out, in))."""
    w = weight.detach().double().numpy().T.reshape(n_head, -1, weight.shape[0])
    return np.linalg.norm(np.einsum("hkd,hdo->hko", v.double().numpy(), w), axis=-1)


def test_r_is_kept_and_follows_the_weight():
    torch.manual_seed(0)
    proj, v = torch.nn.Linear(16, 12), torch.randn(4, 7, 4)
    first = output_norms.r_factors(proj.weight, 4)
    assert output_norms.r_factors(proj.weight, 4) is first  # kept
    np.testing.assert_allclose(output_norms.table(v, first).numpy(), _numpy_table(v, proj.weight, 4), rtol=1e-5)
    with torch.no_grad():
        proj.weight.mul_(3.0)  # an in-place write
    changed = output_norms.r_factors(proj.weight, 4)
    assert changed is not first
    np.testing.assert_allclose(output_norms.table(v, changed).numpy(), _numpy_table(v, proj.weight, 4), rtol=1e-5)
    proj.load_state_dict({"weight": torch.randn(12, 16), "bias": torch.zeros(12)})
    loaded = output_norms.r_factors(proj.weight, 4)
    np.testing.assert_allclose(output_norms.table(v, loaded).numpy(), _numpy_table(v, proj.weight, 4), rtol=1e-5)
    proj.weight.data = torch.randn(12, 16)  # new storage, version counter untouched
    swapped = output_norms.r_factors(proj.weight, 4)
    np.testing.assert_allclose(output_norms.table(v, swapped).numpy(), _numpy_table(v, proj.weight, 4), rtol=1e-5)
    assert output_norms.r_factors(proj.weight, 2) is not swapped  # another head count: its own R


def test_the_cache_keeps_no_model_alive():
    proj = torch.nn.Linear(8, 8)
    output_norms.r_factors(proj.weight, 2)
    gone = weakref.ref(proj)
    del proj
    gc.collect()
    assert gone() is None


def test_traces_of_one_model_share_r_and_agree(bundled):
    a = attnviz.trace(bundled, "the cat sat on the mat")
    weight = bundled.model.encoder.layer[0].attention.output.dense.weight
    kept = output_norms.r_factors(weight, a.n_head)
    b = attnviz.trace(bundled, "the cat sat on the mat")
    assert output_norms.r_factors(weight, b.n_head) is kept
    np.testing.assert_array_equal(a.output_norms(0), b.output_norms(0))


@pytest.mark.parametrize("d_model, d_head", [(96, 16), (8, 32)])  # wider than a head, and narrower (tiny models)
def test_the_table_equals_the_norm_of_v_times_each_heads_slice(d_model, d_head):
    n_head, n_kv, n_key = 4, 2, 5
    gen = torch.Generator().manual_seed(0)
    weight = torch.randn(d_model, n_head * d_head, generator=gen)  # nn.Linear's (out, in)
    v = torch.randn(n_kv, n_key, d_head, generator=gen)
    got = output_norms.table(v, output_norms.r_factors(weight, n_head)).numpy()
    w_o = weight.numpy().T.reshape(n_head, d_head, d_model)  # head h feeds inputs h*d_head .. (h+1)*d_head
    want = np.stack([np.linalg.norm(v.numpy()[h // (n_head // n_kv)] @ w_o[h], axis=-1) for h in range(n_head)])
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
