"""Logit softcapping (Gemma 2): the scores of one head before and after the cap.

Gemma 2 caps q.k x scale with cap x tanh(x / cap) before the mask; the pairs (before, after) of the cells a query may
see show how much the cap squeezed them.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..trace import AttentionTrace


class Softcap(NamedTuple):
    """Scores of the visible cells before and after the cap (at most `limit` of them, evenly spread), the cap and how
    many visible cells there are in all."""

    before: np.ndarray  # q.k x scale (+ bias), what the cap receives
    after: np.ndarray  # cap x tanh(before / cap): the scaled stage
    cap: float
    n_cells: int


def has_softcap(trace: AttentionTrace, layer: int) -> bool:
    return trace.facts(layer).softcap is not None


def softcap_values(trace: AttentionTrace, layer: int, head: int, limit: int = 20_000) -> Softcap | None:
    """The cells a query may see, before and after the layer's logit softcapping; None without softcapping."""
    if not has_softcap(trace, layer):
        return None
    facts, stages = trace.facts(layer), trace.stages(layer, heads=head)
    before = stages.scores[0].astype(np.float64) * facts.scale
    if facts.bias is not None:
        before = before + np.broadcast_to(facts.bias, (trace.n_head, *facts.bias.shape[1:]))[head]
    visible = facts.mask
    before, after = before[visible], stages.scaled[0][visible].astype(np.float64)
    keep = np.unique(np.linspace(0, before.size - 1, min(limit, before.size)).round().astype(int))
    return Softcap(before[keep], after[keep], float(facts.softcap), int(before.size))
