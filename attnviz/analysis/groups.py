"""Key/value groups: query heads that share one key and value head (grouped-query and multi-query attention), and
how alike the heads of a group attend.

Heads of a group read the same keys, so any difference between them comes from their queries alone. The measure is
the Jensen-Shannon divergence between two heads' rows (nats: 0 = the same distribution, at most ln 2), averaged over
the query rows that see any key and over every pair of heads in the group.
"""

from __future__ import annotations

from itertools import combinations

import numpy as np

from ..trace import AttentionTrace
from .compare import js_divergence
from .sinks import reading_rows


def group_divergence(trace: AttentionTrace, layer: int, queries=None) -> np.ndarray:
    """float64 [group]: the mean Jensen-Shannon divergence between the rows of every pair of heads in each of
    `trace.kv_groups` (0 for a group of one head). `queries`: a (start, stop) window of rows, None for all."""
    weights = trace.stages(layer, queries=queries).weights  # [head, query, key]
    start = 0 if queries is None else max(0, int(queries[0]))
    rows = reading_rows(trace, layer, range(trace.n_keys))[start : start + weights.shape[1]]
    out = np.zeros(len(trace.kv_groups))
    for g, heads in enumerate(trace.kv_groups):
        pairs = [js_divergence(weights[a, rows], weights[b, rows]).mean() for a, b in combinations(heads, 2)]
        out[g] = float(np.mean(pairs)) if pairs and rows.any() else 0.0
    return out
