"""Where a layer applied its scale: to the scores, to q, to k, or to both.

OPT, ESM, XGLM and XLM multiply q by the scale before q.k (`scale_on` "q"), DeBERTa-v2 k ("k"), the privacy filter q
and k each by its square root; the trace's scores are always the raw q.k and its scaled stage q.k x scale, whatever
the model did, so the numbers match either way; this says which one the model did.
"""

from __future__ import annotations

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
