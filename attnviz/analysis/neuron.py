"""The neuron view: one query token in one head, taken apart number by number (after bertviz's neuron view).

For query i and every key j (or the keys a page shows: a long text draws a window of them): q_i, k_j, their elementwise product q_i * k_j (its sum is the score q_i . k_j),
the scaled score, the mask, the masked score and the softmax weight. The score stages are the trace's own
(trace.stages, the arrays the pages draw; for texts of at most EXACT_ROWS tokens the whole layer, so every number
equals what the Heads page shows; longer texts compute the query's row alone, equal to float32 rounding). For
grouped-query models each query head reads its shared key head, as the model does (`trace.kv_groups`).

Where the trace keeps values (the capture seam's families and our module; attnviz.analysis.values), the view also holds
each key's ||v W_O||, the size of what the head writes from it per unit of weight, and the product weight x ||v W_O||
(Kobayashi et al. 2020): a large weight on a small value adds little. `module_values` recomputes our module's values
with the same projection (MultiHeadAttention.project) on the same input vectors, for a check from outside the trace.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from .. import checks
from ..errors import InputError, check_index
from ..trace import AttentionTrace

EXACT_ROWS = 128  # up to this many queries the Heads page draws the whole layer: take the same arrays


@dataclass(frozen=True)
class NeuronView:
    """Everything between one query vector and its attention weights; arrays are float32 numpy."""

    layer: int
    head: int
    query: int
    keys: np.ndarray  # [key] int: which keys the per-key arrays below hold (ascending)
    q: np.ndarray  # [d_head]
    k: np.ndarray  # [key, d_head]
    product: np.ndarray  # [key, d_head]   q * k elementwise
    scores: np.ndarray  # [key]            q . k (the trace's scores)
    scale: float
    scaled: np.ndarray  # [key]
    mask: np.ndarray  # [key] bool, True = may attend
    masked: np.ndarray  # [key]
    weights: np.ndarray  # [key]
    row_weights: np.ndarray  # [every key]: the whole row, for the head's output
    written: np.ndarray | None = None  # [key] ||v W_O||: what the head writes from each key per unit of weight

    @property
    def value_norms(self) -> np.ndarray | None:
        """[key] weight x ||v W_O||: the size of what this query takes from each key (None: the trace keeps no values)."""
        return None if self.written is None else self.weights * self.written

    def with_values(self, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """v: [every key, d_head]. (weight * v of the shown keys [key, d_head], the sum over every key: this head's
        output for the query [d_head])."""
        weighted = self.row_weights[:, None].astype(np.float64) * np.asarray(v, np.float64)
        return weighted[self.keys], weighted.sum(axis=0)


@checks.public(name="attnviz.analysis.neuron.neuron_view")
def neuron_view(trace: AttentionTrace, layer: int, head: int, query: int, keys=None) -> NeuronView:
    """One query token of one head, from the trace's q and k (a trace that keeps no vectors says why it has no view).

    keys: the key positions to take apart (None: every key). The softmax still runs over every key."""
    if not trace.has("vectors"):
        raise InputError(
            f"{trace.why_not('vectors')} So there is no neuron view here: the bundled model and our module with a "
            "dot-product score have one."
        )
    layer = check_index("layer", layer, trace.n_layer)
    head = check_index("head", head, trace.n_head)
    query = check_index("query", query, trace.n_tokens)
    shown = np.arange(trace.n_keys) if keys is None else np.unique(np.asarray(keys, dtype=np.int64))
    if shown.size == 0 or shown[0] < 0 or shown[-1] >= trace.n_keys:
        raise InputError(f"keys must lie in 0..{trace.n_keys - 1}.")
    q, k = trace.vectors(layer, head)  # k: the key head this query head reads (grouped-query heads share one)
    q, k = q[query], k[shown]
    # a short text: the whole layer, the very arrays the Heads page draws (a row alone differs by BLAS rounding);
    # a long one: the query's row alone, so 2,048 tokens never build a layer's [head, query, key] stages
    rows = (0, trace.n_tokens) if trace.n_tokens <= EXACT_ROWS else (query, query + 1)
    stages = trace.stages(layer, queries=rows)
    row = lambda a: np.asarray(a[head, query - rows[0]])  # noqa: E731 ([head, query, key] -> [every key])
    facts = trace.facts(layer)
    written = trace.output_norms(layer, heads=head)[0][shown] if trace.has("values") else None
    return NeuronView(
        layer,
        head,
        query,
        shown,
        q,
        k,
        q[None, :] * k,
        row(stages.scores)[shown],
        float(facts.scale),
        row(stages.scaled)[shown],
        facts.mask[query][shown],
        row(stages.masked)[shown],
        row(stages.weights)[shown],
        row(stages.weights),
        written,
    )


def module_values(module: torch.nn.Module, x: torch.Tensor) -> np.ndarray:
    """v [head, key, d_head] of our MultiHeadAttention on input vectors x [T, d_model] (the projection forward uses)."""
    with torch.inference_mode():
        _, _, v = module.project(x[None], x[None], x[None])
    return v[0].float().cpu().numpy()
