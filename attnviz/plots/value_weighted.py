"""Value-weighted attention in the figures: which stages a trace can draw, and the words under them.

Value-weighted attention (attnviz.analysis.values.value_share) is each weight times ||v W_O||, rows rescaled to sum to
1, after Kobayashi et al. 2020: it is drawn like the weights (0..1, the same colour ranges), beside them.
"""

from __future__ import annotations

import textwrap

from ..analysis.values import VALUE_WEIGHTED
from ..trace import AttentionTrace

#: What can be drawn on a 0..1 scale: the weights, and value-weighted attention (rows that also sum to 1).
PROBABILITIES = ("weights", VALUE_WEIGHTED)
#: What value-weighted attention is, under its figures' titles.
VALUE_WEIGHTED_NOTE = (
    "weights × ‖v W_O‖ (the size of what each key's value adds through the output projection), each row rescaled "
    "to sum to 1: Kobayashi et al. 2020, “Attention is not only a weight”"
)
#: The page's caption above the figures.
VALUE_WEIGHTED_CAPTION = (
    "Value-weighted attention (Kobayashi et al. 2020, “Attention is not only a weight”): each weight times ‖v W_O‖, "
    "the size of what that key's value writes into the residual stream through the output projection (its bias left "
    "out), each row rescaled to sum to 1. A key with a large weight but a small value, often a sink such as the first "
    "token, fades."
)


def drawable(trace: AttentionTrace) -> tuple[str, ...]:
    """The stages this trace can draw, then value-weighted attention when it keeps values."""
    return (*trace.available_stages, *((VALUE_WEIGHTED,) if trace.has("values") else ()))


def note_lines(view: str, width: int) -> list[str]:
    """What the view is, for a figure's title: VALUE_WEIGHTED_NOTE in lines of at most `width` characters (Plotly
    never wraps a title); none for the weights."""
    return textwrap.wrap(VALUE_WEIGHTED_NOTE, width) if view == VALUE_WEIGHTED else []
