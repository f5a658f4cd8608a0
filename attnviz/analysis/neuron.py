"""The neuron view: one query token in one head, taken apart number by number (after bertviz's neuron view).

For query i and every key j: q_i, k_j, their elementwise product q_i * k_j (its sum is the score q_i . k_j),
the scaled score, the mask, the masked score and the softmax weight. The score stages are the trace's own
(trace.stages, the arrays the pages draw), so every number equals what the Heads page shows. For
grouped-query models each query head reads its shared key head, as the model does (`trace.kv_groups`).

A trace keeps q and k but not v (values are not needed for the four stages, and keeping them would double
the memory), so the weights x values part is available only for our own module, whose values `module_values`
recomputes with the same projection (MultiHeadAttention.project) on the same input vectors.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ..attention import MultiHeadAttention
from ..errors import InputError, check_index
from ..trace import AttentionTrace


@dataclass(frozen=True)
class NeuronView:
    """Everything between one query vector and its attention weights; arrays are float32 numpy."""

    layer: int
    head: int
    query: int
    q: np.ndarray  # [d_head]
    k: np.ndarray  # [key, d_head]
    product: np.ndarray  # [key, d_head]   q * k elementwise
    scores: np.ndarray  # [key]            q . k (the trace's scores)
    scale: float
    scaled: np.ndarray  # [key]
    mask: np.ndarray  # [key] bool, True = may attend
    masked: np.ndarray  # [key]
    weights: np.ndarray  # [key]

    def with_values(self, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(weights[:, None] * v [key, d_head], their sum: this head's output for the query [d_head])."""
        weighted = self.weights[:, None].astype(np.float64) * np.asarray(v, np.float64)
        return weighted, weighted.sum(axis=0)


def neuron_view(trace: AttentionTrace, layer: int, head: int, query: int) -> NeuronView:
    """One query token of one head, from the trace's q and k (a trace that keeps no vectors says why it has no view)."""
    if not trace.has("vectors"):
        raise InputError(
            f"{trace.why_not('vectors')} So there is no neuron view here: the bundled model and our module with a "
            "dot-product score have one."
        )
    query = check_index("query", query, trace.n_tokens)
    q, k = trace.vectors(layer, head)  # k: the key head this query head reads (grouped-query heads share one)
    q = q[query]
    stages = trace.stages(layer)  # the very arrays every page draws (a per-row recompute differs by BLAS rounding)
    one = lambda a: np.asarray(a[head, query])  # noqa: E731 ([head, query, key] -> [key])
    facts = trace.facts(layer)
    return NeuronView(
        layer, head, query, q, k, q[None, :] * k, one(stages.scores), float(facts.scale), one(stages.scaled),
        facts.mask[query], one(stages.masked), one(stages.weights),
    )  # fmt: skip


def module_values(module: MultiHeadAttention, x: torch.Tensor) -> np.ndarray:
    """v [head, key, d_head] of our module on input vectors x [T, d_model] (the projection forward uses)."""
    with torch.inference_mode():
        _, _, v = module.project(x[None], x[None], x[None])
    return v[0].float().cpu().numpy()
