"""The joint query-key space of a head (analysis.geometry): the normalisation changes no weight, PCA is the points'
own principal axes, the correlations are what the points give, and a rotary model's points are its rotated vectors."""

from __future__ import annotations

import sys

import numpy as np
import pytest
import torch

import attnviz
from attnviz.analysis import geometry as G
from attnviz.errors import AttnvizError, InputError

TEXT = "The cat sat on the mat because it was tired."


@pytest.fixture(scope="module")
def bert_trace(bundled):
    return attnviz.trace(bundled, TEXT, pair="It slept.")


def _softmax_rows(scaled: np.ndarray, mask: np.ndarray) -> np.ndarray:
    x = np.where(mask, scaled, -np.inf)
    x = np.exp(x - x.max(axis=1, keepdims=True))
    return x / x.sum(axis=1, keepdims=True)


@pytest.mark.parametrize("which", ["bert", "llama"])
def test_the_normalisation_leaves_every_weight_of_the_head_unchanged(which, bert_trace, tiny_llama, tiny_text):
    tr = bert_trace if which == "bert" else attnviz.trace(tiny_llama, tiny_text)
    layer = tr.n_layer - 1
    mask, scale = tr.layer_mask(layer), tr.facts(layer).scale
    for head in range(tr.n_head):
        q, k = tr.vectors(layer, head)
        norm = G.normalise(q, k)
        weights = _softmax_rows(norm.q @ norm.k.T * scale, mask)
        assert np.abs(weights - tr.stages(layer, heads=head).weights[0]).max() < 1e-6
        # and it did move the points: centroids meet, mean norms match (both can fail if a and shift are wrong)
        assert np.allclose(norm.q.mean(0), norm.k.mean(0), atol=1e-5)
        assert np.isclose(np.linalg.norm(norm.q, axis=1).mean(), np.linalg.norm(norm.k, axis=1).mean(), rtol=1e-6)


def test_pca_equals_the_covariance_eigenvectors_of_the_same_points_up_to_sign():
    rng = np.random.default_rng(3)
    x = rng.normal(size=(300, 6)) @ rng.normal(size=(6, 6)) + 5.0  # correlated, off-centre
    xy, share = G.pca(x)
    centred = x - x.mean(0)
    values, vectors = np.linalg.eigh(np.cov(centred, rowvar=False))  # independent: eigen-decomposition, ascending
    top = vectors[:, ::-1][:, :2]
    expected = centred @ top
    for axis in range(2):
        sign = np.sign(xy[:, axis] @ expected[:, axis])
        assert np.allclose(xy[:, axis], sign * expected[:, axis], atol=1e-8)
    assert np.allclose(share, values[::-1][:2] / values.sum())
    again, _ = G.pca(x[::-1])  # deterministic signs: the same points in another order give the same picture
    assert np.allclose(again[::-1], xy)


def test_the_reported_correlations_are_those_of_the_points(bert_trace):
    layer, head = 2, 5
    geo = G.head_geometry(bert_trace, layer, head)
    q, k = (v.astype(np.float64) for v in bert_trace.vectors(layer, head))
    mask, scale = bert_trace.layer_mask(layer), bert_trace.facts(layer).scale

    def corr(qq, kk):  # row by row: each query's scores and -distances centred on that row's mean, then pooled
        scores, dists = [], []
        for a in range(len(qq)):
            keys = np.flatnonzero(mask[a])
            s = np.array([qq[a] @ kk[b] for b in keys]) * scale
            d = -np.array([np.sqrt(((qq[a] - kk[b]) ** 2).sum()) for b in keys])
            scores.append(s - s.mean())
            dists.append(d - d.mean())
        s, d = np.concatenate(scores), np.concatenate(dists)
        return (s @ d) / np.sqrt((s @ s) * (d @ d))

    norm = G.normalise(q, k)  # checked apart (centroids meet, norms match): here only its points are used
    assert np.isclose(geo.before, corr(q, k), atol=1e-6)
    assert np.isclose(geo.after, corr(norm.q, norm.k), atol=1e-6)
    assert geo.after != pytest.approx(geo.before, abs=1e-3)  # the normalisation changed the distances
    assert geo.n_queries == geo.n_keys == bert_trace.n_tokens and not geo.sampled and geo.note == ""
    assert geo.is_key.sum() == bert_trace.n_tokens and geo.xy.shape == (2 * bert_trace.n_tokens, 2)


def test_a_causal_mask_limits_the_pairs_and_the_cap_samples_with_a_seed():
    rng = np.random.default_rng(0)
    q, k = rng.normal(size=(40, 8)), rng.normal(size=(40, 8)) + 1
    causal = np.tril(np.ones((40, 40), bool))
    score, dist = q @ k.T, -np.linalg.norm(q[:, None] - k[None], axis=2)

    def centred(m, allowed):  # each row minus its mean over the allowed keys
        mean = np.where(allowed, m, 0).sum(1, keepdims=True) / allowed.sum(1, keepdims=True)
        return (m - mean)[allowed]

    s, d = centred(score, causal), centred(dist, causal)
    assert np.isclose(G.correlation(q, k, causal), s @ d / np.sqrt((s @ s) * (d @ d)))
    s, d = centred(score, np.ones_like(causal)), centred(dist, np.ones_like(causal))
    assert np.isclose(G.correlation(q, k), s @ d / np.sqrt((s @ s) * (d @ d)))  # every pair without the mask
    assert not np.isclose(G.correlation(q, k), G.correlation(q, k, causal))
    assert G.correlation(q, k, most=400, seed=2) != G.correlation(q, k)  # 10 of the 40 rows: a sample said apart
    geo = G.points_geometry(q, k, causal, most=20, seed=1)
    assert geo.sampled and len(geo.xy) == 20 and "seeded sample of 10 queries and 10 keys" in geo.note
    assert np.array_equal(geo.position, G.points_geometry(q, k, causal, most=20, seed=1).position)


def test_a_rotary_model_gives_its_rotated_vectors_with_the_groups_shared_keys(tiny_llama, tiny_llama_dir, eager_copy):
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

    tr = attnviz.trace(tiny_llama, "the cat sat on the mat because it was tired .")
    model = eager_copy(tiny_llama_dir)
    ids = torch.tensor([tr.provenance.input_ids])
    n_head, n_kv, d = model.config.num_attention_heads, model.config.num_key_value_heads, model.config.head_dim
    with torch.no_grad():
        hidden = model(input_ids=ids, output_hidden_states=True).hidden_states
        for layer, block in enumerate(model.layers):
            x = block.input_layernorm(hidden[layer])
            q = block.self_attn.q_proj(x).view(1, -1, n_head, d).transpose(1, 2)
            k = block.self_attn.k_proj(x).view(1, -1, n_kv, d).transpose(1, 2)
            cos, sin = model.rotary_emb(x, torch.arange(ids.shape[1])[None])
            q_rot, k_rot = apply_rotary_pos_emb(q, k, cos, sin)
            assert not torch.allclose(q_rot, q, atol=1e-3)  # the rotation does something at these positions
            for head in range(n_head):
                ours_q, ours_k = tr.vectors(layer, head)
                assert np.allclose(ours_q, q_rot[0, head].numpy(), atol=1e-5)
                assert np.allclose(ours_k, k_rot[0, head // (n_head // n_kv)].numpy(), atol=1e-5)


def test_t_sne_projects_and_a_missing_library_names_its_install_command(monkeypatch):
    rng = np.random.default_rng(0)
    q, k = rng.normal(size=(6, 4)), rng.normal(size=(6, 4))  # few points: t-SNE's iterations cost the same per point
    geo = G.points_geometry(q, k, method="tsne")  # scikit-learn comes with the bundled model
    assert geo.xy.shape == (12, 2) and np.isfinite(geo.xy).all() and geo.explained is None
    monkeypatch.setitem(sys.modules, "umap", None)  # as if umap-learn were not installed
    with pytest.raises(AttnvizError, match="pip install umap-learn=="):
        G.points_geometry(q, k, method="umap")
    with pytest.raises(InputError, match="unknown projection"):
        G.points_geometry(q, k, method="mds")


def test_weights_alone_say_why_there_are_no_points():
    tr = attnviz.AttentionTrace.from_weights(["a", "b"], np.full((1, 1, 2, 2), 0.5))
    with pytest.raises(InputError):
        G.head_geometry(tr, 0, 0)
