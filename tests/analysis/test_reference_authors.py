"""Head statistics and rollout / flow against the reference authors' own algorithms, transcribed into numpy.

The references below follow the authors' code line by line (each names its repository and function); they are
not attnviz's formulas restated. Where attnviz deliberately differs (heads.CLARK_DIFFERENCES), the test converts
between the two and says how. Inputs: the bundled model's trace (plain and padded) and random row-stochastic maps.
"""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest

import attnviz
from attnviz.analysis import heads as H
from attnviz.analysis import rollout as R
from attnviz.trace import AttentionTrace

TEXT = "The cat sat on the mat, because it was tired."  # only "." and "," as punctuation: Clark's set and ours agree


# --- github clarkkev/attention-analysis ------------------------------------------------------------------------


def clark_cut(attns: np.ndarray, seq_len: int) -> np.ndarray:
    """extract_attention.py, main(): `e_attn[:, :, :seq_len, :seq_len]`, a padded map cut to the example's tokens."""
    return attns[:, :, :seq_len, :seq_len]


def clark_token_stats(tokens, attns: np.ndarray) -> dict:
    """General_Analysis.ipynb, the "Computing token stats" cell, for one document (n_docs = 1): attns
    [layer, head, n, n]. Their "left" selector is np.eye(n, n, -1), cell (i, i - 1): the previous token."""
    n_tokens = attns.shape[-1]
    seps, clss, puncts = (np.zeros(n_tokens) for _ in range(3))
    for position, token in enumerate(tokens):
        if token == "[SEP]":
            seps[position] = 1
        if token == "[CLS]":
            clss[position] = 1
        if token == "." or token == ",":
            puncts[position] = 1
    selectors = {
        "self": np.eye(n_tokens, n_tokens),
        "right": np.eye(n_tokens, n_tokens, 1),
        "left": np.eye(n_tokens, n_tokens, -1),
        "sep": np.tile(seps[np.newaxis], [n_tokens, 1]),
        "cls": np.tile(clss[np.newaxis], [n_tokens, 1]),
        "punct": np.tile(puncts[np.newaxis], [n_tokens, 1]),
    }
    return {key: (attns * sel[np.newaxis, np.newaxis]).sum(-1).sum(-1) / n_tokens for key, sel in selectors.items()}


def clark_entropy(attns: np.ndarray) -> np.ndarray:
    """General_Analysis.ipynb, the "Computing entropy stats" cell, one document: smoothed, then row entropy."""
    attns = 0.9999 * attns + (0.0001 / attns.shape[-1])  # smooth to avoid NaNs
    return -(attns * np.log(attns)).sum(-1).mean(-1)


def check_against_clark(stats: H.HeadStats, tokens, attns: np.ndarray) -> None:
    """attnviz's statistics equal Clark et al.'s, converted where attnviz differs on purpose (CLARK_DIFFERENCES)."""
    n = attns.shape[-1]
    ref = clark_token_stats(tokens, attns)
    np.testing.assert_allclose(stats["special"], ref["cls"] + ref["sep"], atol=1e-6)  # one number for both
    np.testing.assert_allclose(stats["punctuation"], ref["punct"], atol=1e-6)
    np.testing.assert_allclose(stats["self"], ref["self"], atol=1e-6)
    np.testing.assert_allclose(stats["previous"] * (n - 1) / n, ref["left"], atol=1e-6)  # they divide by n
    np.testing.assert_allclose(stats["next"] * (n - 1) / n, ref["right"], atol=1e-6)
    # their smoothing moves an entropy by at most ~1e-4 * (1 + ln(n / 1e-4)) nats
    np.testing.assert_allclose(stats["entropy"], clark_entropy(attns), atol=2e-3)


@pytest.fixture(scope="module")
def plain(bundled):
    return attnviz.trace(bundled, TEXT)


@pytest.fixture(scope="module")
def padded(bundled, plain):
    return attnviz.trace(bundled, TEXT, pad_to=plain.n_tokens + 5)


def special_of(trace, bundled):
    return H.special_keys(trace, *H.special_tokens_of(bundled.tokenizer))


def test_clark_statistics_on_the_bundled_trace(plain, bundled):
    stats = H.head_stats(plain, special_of(plain, bundled))
    check_against_clark(stats, plain.tokens, plain.weights.astype(np.float64))


def test_a_padded_trace_gives_clark_numbers_of_the_sentence_alone(plain, padded, bundled):
    n = plain.n_tokens
    assert padded.tokens[n:] == ("[PAD]",) * 5
    stats = H.head_stats(padded, special_of(padded, bundled))
    # Clark et al. cut the padded map to the sentence's tokens before any statistic: no pad query, no pad neighbour
    check_against_clark(stats, padded.tokens[:n], clark_cut(padded.weights.astype(np.float64), n))


def test_clark_statistics_on_random_row_stochastic_maps_with_padding():
    rng = np.random.default_rng(7)
    tokens = ["[CLS]", "a", ",", "b", "c", ".", "[SEP]", "[PAD]", "[PAD]"]
    n, n_real = len(tokens), 7
    mask = np.broadcast_to(np.arange(n) < n_real, (2, n, n)).copy()  # two layers, pad keys hidden
    tr = AttentionTrace.from_scores(tokens, rng.normal(0, 3, (2, 4, n, n)), 1.0, mask, fill=float("-inf"))
    stats = H.head_stats(tr, H.special_keys(tr, special_tokens=["[CLS]", "[SEP]"]))
    check_against_clark(stats, tokens[:n_real], clark_cut(tr.weights.astype(np.float64), n_real))


def test_unk_is_not_a_special_token(bundled):
    tr = attnviz.trace(bundled, "I love 🍕 pizza!")
    assert "[UNK]" in tr.tokens
    special = special_of(tr, bundled)
    assert [t for t, s in zip(tr.tokens, special) if s] == ["[CLS]", "[SEP]"]
    stats = H.head_stats(tr, special)
    ref = clark_token_stats(tr.tokens, tr.weights.astype(np.float64))
    np.testing.assert_allclose(stats["special"], ref["cls"] + ref["sep"], atol=1e-6)


# --- github samiraabnar/attention_flow, attention_graph_util.py and bert_example.ipynb -----------------------


def abnar_residual(att_mat: np.ndarray) -> np.ndarray:
    """bert_example.ipynb: heads averaged, + identity, rows renormalised. att_mat [layer, head, n, n]."""
    res_att_mat = att_mat.sum(axis=1) / att_mat.shape[1]
    res_att_mat = res_att_mat + np.eye(res_att_mat.shape[1])[None, ...]
    return res_att_mat / res_att_mat.sum(axis=-1)[..., None]


def compute_joint_attention(att_mat: np.ndarray, add_residual: bool = True) -> np.ndarray:
    """attention_graph_util.compute_joint_attention: [layer, n, n] -> joint attention after each layer."""
    if add_residual:
        residual_att = np.eye(att_mat.shape[1])[None, ...]
        aug_att_mat = att_mat + residual_att
        aug_att_mat = aug_att_mat / aug_att_mat.sum(axis=-1)[..., None]
    else:
        aug_att_mat = att_mat
    joint_attentions = np.zeros(aug_att_mat.shape)
    joint_attentions[0] = aug_att_mat[0]
    for i in np.arange(1, joint_attentions.shape[0]):
        joint_attentions[i] = aug_att_mat[i].dot(joint_attentions[i - 1])
    return joint_attentions


def get_adjmat(mat: np.ndarray, input_tokens) -> tuple[np.ndarray, dict]:
    """attention_graph_util.get_adjmat: node (layer i, token k) is index i * length + k; edges point down."""
    n_layers, length, _ = mat.shape
    adj_mat = np.zeros(((n_layers + 1) * length, (n_layers + 1) * length))
    labels_to_index = {}
    for k in np.arange(length):
        labels_to_index[str(k) + "_" + input_tokens[k]] = k
    for i in np.arange(1, n_layers + 1):
        for k_f in np.arange(length):
            index_from = i * length + k_f
            labels_to_index["L" + str(i) + "_" + str(k_f)] = index_from
            for k_t in np.arange(length):
                adj_mat[index_from][(i - 1) * length + k_t] = mat[i - 1][k_f][k_t]
    return adj_mat, labels_to_index


def attention_graph(adjmat: np.ndarray) -> nx.DiGraph:
    """attention_graph_util.draw_attention_graph, its graph only (nx.from_numpy_matrix is from_numpy_array now)."""
    g = nx.from_numpy_array(adjmat, create_using=nx.DiGraph())
    for i in np.arange(adjmat.shape[0]):
        for j in np.arange(adjmat.shape[1]):
            nx.set_edge_attributes(g, {(i, j): adjmat[i, j]}, "capacity")
    return g


def compute_node_flow(g, labels_to_index, input_nodes, output_nodes, length) -> np.ndarray:
    """attention_graph_util.compute_node_flow: max flow from each output node to each input, rows normalised."""
    number_of_nodes = len(labels_to_index)
    flow_values = np.zeros((number_of_nodes, number_of_nodes))
    for key in output_nodes:
        if key not in input_nodes:
            current_layer = int(labels_to_index[key] / length)
            pre_layer = current_layer - 1
            u = labels_to_index[key]
            for inp_node_key in input_nodes:
                v = labels_to_index[inp_node_key]
                flow_value = nx.maximum_flow_value(g, u, v, flow_func=nx.algorithms.flow.edmonds_karp)
                flow_values[u][pre_layer * length + v] = flow_value
            flow_values[u] /= flow_values[u].sum()
    return flow_values


def abnar_flow(weights: np.ndarray, tokens, query: int) -> np.ndarray:
    """bert_example.ipynb's flow pipeline for one output token of the top layer: [input token]."""
    res = abnar_residual(weights)
    n_layers, length = res.shape[0], res.shape[-1]
    adj, labels = get_adjmat(res, tokens)
    inputs = [k for k in labels if labels[k] < length]
    out = "L" + str(n_layers) + "_" + str(query)
    values = compute_node_flow(attention_graph(adj), labels, inputs, [out], length)
    return values[labels[out], (n_layers - 1) * length : n_layers * length]


def random_maps(n_layer=3, n_head=2, n=5, seed=0) -> np.ndarray:
    w = np.random.default_rng(seed).random((n_layer, n_head, n, n)) ** 3
    return w / w.sum(-1, keepdims=True)


@pytest.mark.parametrize("seed", [0, 1])
def test_rollout_and_flow_on_random_maps_equal_abnar_and_zuidema(seed):
    w = random_maps(seed=seed)
    tokens = ["a", "b", "the", "the", "c"]  # a repeated token: their labels carry the position
    tr = AttentionTrace.from_weights(tokens, w)
    np.testing.assert_allclose(R.rollout(tr), compute_joint_attention(w.mean(axis=1))[-1], atol=1e-12)
    np.testing.assert_allclose(R.rollout(tr, 1, 2), compute_joint_attention(w[1:].mean(axis=1))[-1], atol=1e-12)
    for query in range(len(tokens)):
        np.testing.assert_allclose(R.flow(tr, query), abnar_flow(w, tokens, query), atol=1e-9)
    np.testing.assert_allclose(R.flow(tr, 2, 0, 1), abnar_flow(w[:2], tokens, 2), atol=1e-9)


def test_rollout_and_flow_on_the_bundled_trace_equal_abnar_and_zuidema(plain):
    w = plain.weights.astype(np.float64)
    joint = compute_joint_attention(abnar_residual(w), add_residual=False)  # as the notebook calls it
    np.testing.assert_allclose(R.rollout(plain), joint[-1], atol=1e-9)
    np.testing.assert_allclose(R.rollout(plain, 2, 4), compute_joint_attention(w[2:5].mean(axis=1))[-1], atol=1e-9)
    flow = R.flow(plain, 3)
    np.testing.assert_allclose(flow, abnar_flow(w, list(plain.tokens), 3), atol=1e-7)
    assert flow.sum() == pytest.approx(1.0)
