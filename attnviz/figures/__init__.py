"""The figures each page draws, for a trace you hold: what a dashboard page lays out and `attnviz.show` puts in a
notebook. The one place a page's figures are composed.

A page's controls become keyword arguments (layer, head, stage, ...); `figures.<page>(trace, **controls)` returns
a Drawn: (title, figure) pairs in order, each figure found by its name (`drawn["head_grid"]`), and, where the page
shows numbers beside its figures, those numbers too. Every figure comes from attnviz/plots on the numbers of
attnviz/analysis. No streamlit here.
"""

from __future__ import annotations

import inspect

from .. import checks
from ..errors import InputError, check_index
from ..trace import AttentionTrace
from .compare import Compared, QueryKeySpace, compare, geometry, geometry_title
from .drawn import SPECIAL_TOKENS, Drawn, special_positions
from .heads import HeadStatistics, Neuron, Statistics, head_statistics, heads, headstats, neuron
from .scaling import Masks, Scaling, law, masks, scaling
from .tokens import WORD_TICKS, Pairs, Rollout, Words, flow, pairs, rollout, words

PAGES = {
    "heads": heads,
    "scaling": scaling,
    "masks": masks,
    "headstats": headstats,
    "rollout": rollout,
    "neuron": neuron,
    "words": words,
    "pairs": pairs,
    "compare": compare,
    "geometry": geometry,
}

#: Controls a page passes that a notebook has no use for (what the page already computed, shared with the call).
_PAGE_ONLY = {"computed"}


def page_figures(trace: AttentionTrace, page: str = "heads", layer: int = 0, head: int = 0, **options) -> list:
    """[(title, figure)] of one dashboard page for `trace`; `options` are the page's own controls."""
    if not isinstance(trace, AttentionTrace):
        raise InputError(f"show needs an AttentionTrace (from attnviz.trace), got {type(trace).__name__}.")
    draw = PAGES[checks.choice("page", page, tuple(PAGES))]
    allowed = [p for p in list(inspect.signature(draw).parameters)[3:] if p not in _PAGE_ONLY]
    checks.keywords(f"attnviz.show(page={page!r})", options, allowed)
    layer = check_index("layer", layer, trace.n_layer)
    head = check_index("head", head, trace.n_head)
    return list(draw(trace, layer, head, **options))


__all__ = [
    "PAGES",
    "SPECIAL_TOKENS",
    "WORD_TICKS",
    "Compared",
    "Drawn",
    "HeadStatistics",
    "Masks",
    "Neuron",
    "Pairs",
    "QueryKeySpace",
    "Rollout",
    "Scaling",
    "Statistics",
    "Words",
    "compare",
    "flow",
    "geometry",
    "geometry_title",
    "head_statistics",
    "heads",
    "headstats",
    "law",
    "masks",
    "neuron",
    "page_figures",
    "pairs",
    "rollout",
    "scaling",
    "special_positions",
    "words",
]
