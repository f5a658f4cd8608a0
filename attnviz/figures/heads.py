"""The figures of the pages about heads: Heads, Head statistics and the Neuron view."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..analysis import heads as H
from ..analysis import neuron as N
from ..analysis import values as V
from ..analysis.neuron import NeuronView
from ..errors import InputError
from ..plots import headstats as hp
from ..plots import heatmaps as hm
from ..plots import neuron as nv
from ..plots.common import numbered
from ..trace import AttentionTrace
from .drawn import Drawn, special_positions


def heads(
    trace: AttentionTrace,
    layer: int = 0,
    head: int = 0,
    stage: str = "weights",
    colours: str = "linear",
    token_range=None,
    boundary: int | None = None,
    without=(),
    first_head: int = 0,
    groups: dict | None = None,
) -> Drawn:
    """Every head of a layer on one scale, one head up close (every stage in its hover), every layer x head.
    token_range: the tokens drawn (a range or plots.heatmaps.Window); boundary: where sentence B starts; without:
    keys left out of the weights (rows renormalised); first_head: the grid's first head (more heads than it draws);
    groups: the grid's `cols` and `titles` for key/value groups."""
    if stage not in hm.drawable(trace):
        raise InputError(f"stage {stage!r} is not available here; choose one of {', '.join(hm.drawable(trace))}.")
    where = trace.provenance.layer_label(layer)
    drawn = dict(token_range=token_range, colours=colours, boundary=boundary, without=without)
    grid = hm.head_grid(trace, layer, stage, **drawn, first_head=first_head, **(groups or {}))
    out = [
        (f"Every head of {where} · {stage}", grid),
        (f"Head {head} of {where} up close", hm.head_detail(trace, layer, head, stage, **drawn)),
    ]
    if trace.n_layer > 1:  # one layer (our module): its overview would repeat the grid
        out.append(("All layers × heads", hm.overview(trace, stage, selected=(layer, head), colours=colours)))
    return Drawn(tuple(out))


@dataclass(frozen=True)
class Statistics:
    """Every statistic of every head (`stats`), what each one is (`info`: label, meaning, range; the induction
    score when a repeated text was traced), and the keys they leave out."""

    stats: H.HeadStats
    info: dict
    special: np.ndarray
    hide: bool = False
    leave_out: tuple = ()

    def hidden(self, n_keys: int) -> np.ndarray:
        return H.left_out_keys(n_keys, self.special if self.hide else None, self.leave_out)


def head_statistics(trace: AttentionTrace, special=None, hide=False, leave_out=(), repeat=None) -> Statistics:
    """The numbers behind the statistic grid. special: see drawn.special_positions; hide: leave the special keys
    out (rows renormalised); leave_out: key positions left out the same way; repeat: a trace of a repeated random
    text (for the induction score; self-attention only)."""
    keys = special_positions(trace, special)
    stats = H.head_stats(trace, keys, hide_special=hide, leave_out=leave_out)
    info = dict(H.STATISTICS)
    if repeat is not None and trace.n_tokens == trace.n_keys and len(repeat.provenance.input_ids) == repeat.n_tokens:
        stats = stats.with_values(induction_score=H.induction_scores(repeat, leave_out=leave_out))
        info["induction_score"] = H.INDUCTION
    return Statistics(stats, info, keys, bool(hide), tuple(leave_out))


@dataclass(frozen=True)
class HeadStatistics(Drawn):
    statistics: Statistics = field(default=None)


def headstats(
    trace: AttentionTrace,
    layer: int = 0,
    head: int = 0,
    statistic: str = "entropy",
    special=None,
    view: str = "weights",
    hide: bool = False,
    leave_out=(),
    repeat: AttentionTrace | None = None,
    selected="open",
    boundary: int | None = None,
    token_range=None,
    computed: Statistics | None = None,
) -> HeadStatistics:
    """One statistic per layer x head (Clark et al. 2019) and one head's weights (`view`: "weights" or
    "value-weighted", as on every page). `special`: the tokenizer's special tokens (default: [CLS], <s>, ...);
    hide, leave_out, repeat: as in head_statistics (`computed`: its result, when the caller has it already);
    selected: the head outlined on the grid ("open": the one drawn below, None: none)."""
    numbers = computed or head_statistics(trace, special, hide, leave_out, repeat)
    if statistic not in numbers.info:
        raise InputError(f"unknown statistic {statistic!r}; choose one of {', '.join(numbers.info)}.")
    label, _, value_range = numbers.info[statistic]
    outline = (layer, head) if selected == "open" else selected
    w = V.attention_view(trace, layer, view, heads=head)[0]  # this head only
    hidden = numbers.hidden(trace.n_keys)
    w = H.hide_keys(w, hidden) if hidden.any() else w  # value-weighted rows too: their rest, rescaled to 1
    left_out = " and ".join((["special tokens"] if numbers.hide else []) + (["key 0"] if numbers.leave_out else []))
    title = f"layer {layer}, head {head}: {view}" + (f" ({left_out} hidden, rows renormalised)" if left_out else "")
    matrix = hp.weights_matrix(
        w, trace.tokens, title, "head_weights", trace.key_tokens, boundary, token_range, view=view
    )
    grid = hp.stat_grid(numbers.stats[statistic], label, value_range, selected=outline)
    return HeadStatistics(((f"Head statistics: {label}", grid), (title[0].upper() + title[1:], matrix)), numbers)


@dataclass(frozen=True)
class Neuron(Drawn):
    """The view's numbers as the page's tables: `table` one row per key, `values` (None without value vectors)
    each key's value vector and the head's output."""

    view: NeuronView = field(default=None)
    table: dict = field(default_factory=dict)
    values: dict | None = None


def neuron(trace: AttentionTrace, layer: int = 0, head: int = 0, query: int = 0, keys=None) -> Neuron:
    """One query token in one head: q, every k, their product, scores, scaled, mask, masked, weights.
    keys: the key positions taken apart (None: every key; the softmax still runs over all of them)."""
    view = N.neuron_view(trace, layer, head, query, keys)
    title = f"{query:02d} {trace.tokens[query]} in layer {layer}, head {head}"
    names = [numbered(trace.key_tokens)[j] for j in view.keys]
    table = {
        "key": names,
        "q·k (scores)": view.scores,
        f"× {view.scale:.4g} (scaled)": view.scaled,
        "may attend": view.mask,
        "masked": view.masked,
        "weight": view.weights,
    }
    values = trace.values(layer, head) if trace.has("values") else None  # [every key, d_value], as the model used them
    by_key = None
    if values is not None:
        weighted, output = view.with_values(values)
        table["|weight × v|"] = np.linalg.norm(weighted, axis=-1)
        table["‖v W_O‖"] = view.written
        table["weight × ‖v W_O‖"] = view.value_norms
        by_key = {"output (sum of weight × v)": output, **{f"v of {n}": values[j] for n, j in zip(names, view.keys)}}
    return Neuron(((title, nv.vectors(view, trace.tokens, trace.key_tokens)),), view, table, by_key)
