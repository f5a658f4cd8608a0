"""Attention rollout and attention flow (Abnar & Zuidema 2020, "Quantifying Attention Flow in Transformers").

Raw attention of a late layer mixes tokens that earlier layers have already mixed, so it says little about
which *input* tokens an output draws on. Both methods follow attention down through the layers, with the
residual connection accounted for: each layer's graph is A' = 0.5 * A + 0.5 * I (half the signal skips
attention), rows renormalised, heads averaged.

- rollout: multiply the layers' matrices, R = A'_end @ ... @ A'_start (row i: how much output token i
  draws on each input token, rows sum to 1).
- flow: treat A' of every layer as edge capacities of a layered graph and take the maximum flow from an
  output token at the top to each input token at the bottom, then divide by their sum so that one output
  token's flows share out 1 over the inputs, as their `compute_flows` does (github samiraabnar/attention_flow,
  attention_graph_util.py). One max-flow per (output, input) pair on a graph of layers x tokens^2 edges, so it
  is computed for short inputs only (MAX_FLOW_TOKENS) and one output token at a time.

Both are checked against the authors' `compute_joint_attention` and `compute_flows` (tests/analysis).
"""

from __future__ import annotations

import numpy as np

from .. import checks
from ..errors import InputError
from ..trace import AttentionTrace
from ..trace.window_cache import remembered

MAX_FLOW_TOKENS = 32  # 32 tokens x 6 layers: ~3 s on 2 cores; 64 tokens took 28 s


def residual_matrix(weights: np.ndarray) -> np.ndarray:
    """One layer's graph: heads averaged, 0.5 * A + 0.5 * I, rows renormalised. weights [head, query, key]."""
    a = np.asarray(weights, np.float64).mean(axis=0)
    if a.shape[0] != a.shape[1]:
        raise InputError("rollout needs self-attention (as many queries as keys)")
    a = 0.5 * a + 0.5 * np.eye(a.shape[0])
    return a / a.sum(axis=-1, keepdims=True)


def layer_range(trace: AttentionTrace, start: int = 0, end: int | None = None) -> range:
    """The layers start..end (inclusive), checked."""
    start = checks.whole("start", start, low=0, high=trace.n_layer - 1)
    end = trace.n_layer - 1 if end is None else checks.whole("end", end, low=0, high=trace.n_layer - 1)
    if end < start:
        raise checks.ArgumentError(
            "end", f"choose layers with 0 <= start <= end <= {trace.n_layer - 1}, got {start}..{end}"
        )
    return range(start, end + 1)


@checks.public(name="attnviz.analysis.rollout.rollout")
@remembered
def rollout(trace: AttentionTrace, start: int = 0, end: int | None = None) -> np.ndarray:
    """[query, key] attention rollout from layer `start` up to layer `end` (inclusive): A'_end @ ... @ A'_start."""
    out = None
    for layer in layer_range(trace, start, end):
        a = residual_matrix(trace.layer(layer).weights)
        out = a if out is None else a @ out
    return out


def flow_graph(mats: list[np.ndarray]):
    """networkx DiGraph: node (level, token); level 0 is the input, level k+1 the output of mats[k];
    an edge (level + 1, i) -> (level, j) with capacity mats[level][i, j]."""
    import networkx as nx

    g = nx.DiGraph()
    for level, a in enumerate(mats):
        rows, cols = np.nonzero(a > 0)
        g.add_edges_from(
            ((level + 1, int(i)), (level, int(j)), {"capacity": float(a[i, j])}) for i, j in zip(rows, cols)
        )
    return g


@remembered
def layer_mean(trace: AttentionTrace, layer: int) -> np.ndarray:
    """[query, key]: one layer's weights averaged over its heads (what one layer does, beside the rollout)."""
    return trace.stages(layer).weights.mean(axis=0)


@checks.public(name="attnviz.analysis.rollout.flow")
@remembered
def flow(trace: AttentionTrace, query: int, start: int = 0, end: int | None = None) -> np.ndarray:
    """[key] attention flow from output token `query` (after layer `end`) to every input token (before `start`).

    Each input's max-flow value divided by the sum over inputs (their normalisation: the values sum to 1), so
    flow and rollout read on the same scale; raises InputError past MAX_FLOW_TOKENS tokens or without networkx.
    """
    query, layers = checks.check_index("query", query, trace.n_tokens), layer_range(trace, start, end)
    if trace.n_tokens > MAX_FLOW_TOKENS:
        raise InputError(
            f"attention flow needs one max-flow per token on a graph of layers x tokens² edges: it is computed for "
            f"up to {MAX_FLOW_TOKENS:,} tokens, this text has {trace.n_tokens:,}. Rollout works at any length."
        )
    try:
        import networkx as nx
    except ImportError:
        raise InputError("attention flow needs networkx (pip install networkx); rollout does not.") from None
    mats = [residual_matrix(trace.layer(i).weights) for i in layers]
    g = flow_graph(mats)
    top = (len(mats), query)
    values = np.array([nx.maximum_flow_value(g, top, (0, j)) for j in range(trace.n_tokens)])
    return values / values.sum()  # never 0: the residual half keeps a path from every output to its own input
