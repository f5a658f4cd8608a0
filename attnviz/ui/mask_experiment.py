"""The Masks page's experiment: the three traces it compares and the copy that names
what the numbers of attnviz.analysis.masks mean. The page itself only lays the controls and charts out."""

from __future__ import annotations

from typing import NamedTuple

from ..analysis import masks as analysis
from ..trace import AttentionTrace
from .data import get_trace
from .state import Selection


class MaskTraces(NamedTuple):
    """with_mask: the experiment; without: every key visible; model_own: the model as it is (what the change is
    measured from)."""

    with_mask: AttentionTrace
    without: AttentionTrace
    model_own: AttentionTrace


def mask_traces(src: Selection, opts: dict) -> MaskTraces | None:
    """The three traces of one experiment (None when one of them could not be made: the frame said why)."""
    traces = (get_trace(src, **o) for o in (opts, analysis.unmasked_options(opts), analysis.model_options(opts)))
    found = tuple(traces)
    return None if any(t is None for t in found) else MaskTraces(*found)


def dead_note(rows, fill_name: str, n_keys: int, layer: int, head: int) -> str:
    """What the model computes for queries with no visible key: the truth, not a 0% leak."""
    names = ", ".join(str(d.query) for d in rows[:8]) + (", …" if len(rows) > 8 else "")
    one = len(rows) == 1
    note = f"**{'Query' if one else 'Queries'} {names} {'has' if one else 'have'} no visible key** in layer {layer}."
    first = rows[0]
    if first.total == 0:
        return note + " With the fill −inf such a row is all zeros: the query attends to nothing."
    where = (
        f"{first.future:.0%} of its weight on future positions that a causal model should never see, the rest on "
        "the other masked keys"
        if first.future > 0
        else "all of its weight on keys it should not see"
    )
    return note + (
        f" The softmax still runs: with the fill {fill_name} every masked cell holds the same value, so the row is "
        f"uniform over all {n_keys:,} keys. In head {head}, query {first.query} puts {where}. Charts 2 and 3 show and "
        "count that weight; the fill −inf would give a row of zeros instead."
    )


def leak_caption(layers, n_layer: int, kept: str, changed: bool) -> str:
    """Chart 3's caption: what a leak is, which layers ran with the model's own mask, what the change measures."""
    starred = (
        f"Layers without a star ran with the model's own mask ({kept}) in both series, not yours: a 0% there is the "
        "model's mask holding. "
        if layers is not None and n_layer > 1
        else ""
    )
    return (
        "Left: the share of a real query's attention that lands on keys it should not see (padding, future or hidden "
        "tokens, and whatever the model's own mask hides). A mask brings it to exactly 0 where it holds, unless a "
        "query has no visible key at all: a finite fill then spreads its whole weight over every key. "
        + starred
        + "Right: the largest change in each layer's weights against the model's own trace (no experiment); layers "
        "after a changed one change too, because their input changed."
        + ("" if changed else " All 0: with these settings the experiment is what the model does anyway.")
    )
