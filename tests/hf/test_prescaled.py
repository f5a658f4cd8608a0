"""Families that fold the scale into q (OPT, ESM) or into q and k (openai_privacy_filter) and pass scaling=1.0:
the trace's scores are still the raw q.k and its scale the one the model applied, with where it applied it.

Scores are compared with q.k computed here from the module's own projection weights; weights with transformers'
eager attention of a copy loaded independently from the same folder.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import attnviz
from tests.hf import families as fm

TEXT, ATOL, D_HEAD = fm.TEXT, 1e-5, 8
PROJECTIONS = {"opt": ("q_proj", "k_proj"), "esm": ("query", "key")}


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("prescaled")
    return {f: fm.build(f, root / f) for f in ("opt", "esm", "openai_privacy_filter")}


def _eager_weights(folder, ids) -> np.ndarray:
    with torch.no_grad():
        out = fm.eager_model(folder)(input_ids=torch.tensor([ids]), output_attentions=True)
    return fm.stack_attentions(out.attentions)


@pytest.mark.parametrize("family", ["opt", "esm"])
def test_scale_is_the_real_one_and_scores_are_raw_q_dot_k(family, folders):
    loaded = attnviz.load_model(str(folders[family]), device="cpu")
    tr = attnviz.trace(loaded, TEXT)
    assert tr.scale_on == ("q",) * tr.n_layer
    np.testing.assert_allclose(tr.scale, D_HEAD**-0.5, rtol=1e-7)
    for i in range(tr.n_layer):
        x, _, _ = attnviz.attention_inputs(loaded, TEXT, i)
        module = loaded.attention_modules[i]
        q_lin, k_lin = (getattr(module, name) for name in PROJECTIONS[family])
        with torch.no_grad():
            q, k = (lin(x).view(tr.n_tokens, 4, D_HEAD).transpose(0, 1) for lin in (q_lin, k_lin))
        stages = tr.layer(i)
        np.testing.assert_allclose(stages.scores, (q @ k.transpose(-2, -1)).numpy(), rtol=0, atol=ATOL)
        np.testing.assert_allclose(stages.scaled, stages.scores * D_HEAD**-0.5, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(tr.weights, _eager_weights(folders[family], tr.provenance.input_ids), rtol=0, atol=ATOL)


def test_a_scale_experiment_replaces_the_real_scale(folders):
    """Doubling OPT's scale doubles 1/sqrt(d_head), not the 1.0 the model passes (that would leave q pre-scaled)."""
    loaded = attnviz.load_model(str(folders["opt"]), device="cpu")
    plain = attnviz.trace(loaded, TEXT)
    doubled = attnviz.trace(loaded, TEXT, scale=2 * D_HEAD**-0.5, layers=[0])
    layer = plain.layer(0)
    expected = torch.softmax(torch.from_numpy(layer.scores * 2 * D_HEAD**-0.5).masked_fill(
        ~torch.from_numpy(plain.layer_mask(0)), plain.fill[0]), dim=-1)  # fmt: skip
    np.testing.assert_allclose(doubled.layer(0).weights, expected.numpy(), rtol=0, atol=ATOL)
    np.testing.assert_allclose(doubled.scale, [2 * D_HEAD**-0.5, D_HEAD**-0.5], rtol=1e-7)


def test_scale_folded_into_q_and_k_is_recorded_as_one_scale(folders):
    loaded = attnviz.load_model(str(folders["openai_privacy_filter"]), device="cpu")
    tr = attnviz.trace(loaded, TEXT)
    assert tr.scale_on == ("q and k",) * tr.n_layer
    np.testing.assert_allclose(tr.scale, D_HEAD**-0.5, rtol=1e-6)  # d^-1/4 on q times d^-1/4 on k
    reference = _eager_weights(folders["openai_privacy_filter"], tr.provenance.input_ids)
    np.testing.assert_allclose(tr.weights, reference, rtol=0, atol=ATOL)


def test_other_families_scale_their_scores():
    from tests.helpers import make_trace

    assert set(make_trace(["a", "b"]).scale_on) == {"scores"}
