"""What some models add to plain attention, for one layer and head: where the scale was applied, the share of each
query that went to an attention sink, and the scores before and after logit softcapping.

- scale_site: OPT, ESM, XGLM and XLM multiply q by the scale before q.k (`scale_on` "q"), DeBERTa-v2 k ("k"), the
  privacy filter q and k each by its square root; the trace's scores are always the raw q.k and its scaled stage
  q.k x scale, whatever the model did, so the numbers match either way; this says which one the model did.
- sink_share: gpt-oss and Inkling 2 put a sink logit in every row's softmax and drop it afterwards, so a row's weights
  sum to less than 1; 1 - the row's sum is what the sink took.
- softcap_values: Gemma 2 caps q.k x scale with cap x tanh(x / cap) before the mask; the pairs (before, after) of the
  cells a query may see show how much the cap squeezed them.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..trace import AttentionTrace

SCALE_SITES = {
    "scores": "The model multiplies each dot product q·k by the scale ({scale:.4g}): scaled = q·k × {scale:.4g}.",
    "q": (
        "The model multiplies q by the scale ({scale:.4g}) before the dot product, (q × {scale:.4g})·k. That is the same "
        "number as q·k × {scale:.4g}: the scores shown here are the raw q·k and the scaled stage is what the model used."
    ),
    "k": (
        "The model multiplies k by the scale ({scale:.4g}) before the dot product, q·(k × {scale:.4g}). That is the same "
        "number as q·k × {scale:.4g}: the scores shown here are the raw q·k and the scaled stage is what the model used."
    ),
    "q and k": (
        "The model multiplies q and k each by √{scale:.4g} before the dot product. That is the same number as "
        "q·k × {scale:.4g}: the scores shown here are the raw q·k and the scaled stage is what the model used."
    ),
}


def scale_site(trace: AttentionTrace, layer: int) -> str | None:
    """A sentence saying where `layer` applied its scale (None for given weights or an unknown place)."""
    facts = trace.facts(layer)
    text = SCALE_SITES.get(facts.scale_on)
    return None if text is None else text.format(scale=facts.scale)


def has_sinks(trace: AttentionTrace, layer: int) -> bool:
    return trace.facts(layer).sinks is not None


def sink_share(trace: AttentionTrace, layer: int, head: int) -> np.ndarray | None:
    """[query] the share of each query's attention that went to the sink: 1 - the row's sum of weights (float64).

    None when the layer has no sinks (its rows sum to 1) or the trace has only weights.
    """
    if not has_sinks(trace, layer):
        return None
    weights = trace.stages(layer, heads=head).weights[0]
    return 1.0 - weights.sum(-1, dtype=np.float64)


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
