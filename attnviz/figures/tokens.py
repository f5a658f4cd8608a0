"""The figures of the pages that follow tokens: Rollout (and attention flow), Words and Sentence pairs."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..analysis import pairs as P
from ..analysis import rollout as R
from ..analysis import values as V
from ..analysis import words as W
from ..errors import InputError, check_index
from ..plots import headstats as hp
from ..plots import pairs as pp
from ..plots import rollout as rp
from ..trace import AttentionTrace
from .drawn import Drawn, special_positions

WORD_TICKS = 32  # labels per axis: every word of a sentence of up to 32; more slanted key labels touch at full width


@dataclass(frozen=True)
class Rollout(Drawn):
    """`rollout`: the rolled-out matrix [query, key] of layers start..end."""

    rollout: np.ndarray | None = field(default=None)


def rollout(
    trace: AttentionTrace,
    layer: int = 0,
    head: int = 0,
    start: int = 0,
    end: int | None = None,
    token_range=None,
    boundary: int | None = None,
    max_ticks: int = hp.MAX_TICKS,
    query: int | None = None,
) -> Rollout:
    """Attention rollout (Abnar & Zuidema 2020) over layers start..end beside layer end's own weights (max_ticks:
    labels per axis, fewer side by side); query: also the attention flow from that output token (short texts)."""
    if trace.n_tokens != trace.n_keys:
        raise InputError("Rollout needs self-attention: this trace has different query and key tokens.")
    end = trace.n_layer - 1 if end is None else check_index("end layer", end, trace.n_layer)
    roll, raw = R.rollout(trace, start, end), R.layer_mean(trace, end)  # both kept for every session
    drawn = dict(boundary=boundary, token_range=token_range, max_ticks=max_ticks)
    out = [
        (
            f"Rollout, layers {start}–{end}",
            hp.weights_matrix(roll, trace.tokens, f"rollout, layers {start}–{end}", "rollout", **drawn),
        ),
        (
            f"Raw weights of layer {end}, heads averaged",
            hp.weights_matrix(raw, trace.tokens, f"raw weights of layer {end}, heads averaged", "raw_last", **drawn),
        ),
    ]
    if query is not None:
        out.append(flow(trace, query, start, end, roll))
    return Rollout(tuple(out), roll)


def flow(trace: AttentionTrace, query: int, start: int = 0, end: int | None = None, rolled=None) -> tuple:
    """(title, figure) of the attention flow from output token `query` beside its rollout row (at most
    analysis.rollout.MAX_FLOW_TOKENS tokens); `rolled`: the rollout of start..end, when the caller has it."""
    query = check_index("query", query, trace.n_tokens)
    if trace.n_tokens > R.MAX_FLOW_TOKENS:
        raise InputError(f"Attention flow is computed for up to {R.MAX_FLOW_TOKENS} tokens; this trace has more.")
    end = trace.n_layer - 1 if end is None else end
    rolled = R.rollout(trace, start, end) if rolled is None else rolled
    bars = rp.flow_bars(trace.tokens, rolled[query], R.flow(trace, query, start, end), query)
    return f"Attention flow from token {query}, layers {start}–{end}", bars


@dataclass(frozen=True)
class Words(Drawn):
    """The words (lists of token positions) of the queries and the keys, and where sentence B starts among them."""

    groups: list = field(default_factory=list)
    key_groups: list = field(default_factory=list)
    word_boundary: int | None = None


def words(
    trace: AttentionTrace,
    layer: int = 0,
    head: int = 0,
    scheme: str | None = None,
    view: str = "weights",
    special=None,
    boundary: int | None = None,
    where: str | None = None,
) -> Words:
    """One head between words (sub-word pieces merged back) beside the same head between tokens (of `view`).
    scheme: the sub-word convention (None: the tokenizer's own words, else the markers'); special: see
    drawn.special_positions; where: what the layer is called (default "layer 3")."""
    groups, key_groups = W.trace_groups(trace, scheme, special_positions(trace, special))
    labels, key_labels = (
        W.word_labels(trace.tokens, groups, scheme),
        W.word_labels(trace.key_tokens, key_groups, scheme),
    )
    w = V.attention_view(trace, layer, view, heads=head)[0]  # rows of 1 either way, so merged rows are too
    merged = W.merge_words(w, groups, key_groups)
    word_boundary = W.word_position(groups, boundary)
    name = f"{where or trace.provenance.layer_label(layer)}, head {head}: {view}"
    by_word = hp.weights_matrix(
        merged, labels, f"{name}, words", "words_head", key_labels, word_boundary, max_ticks=WORD_TICKS, view=view
    )
    by_token = hp.weights_matrix(
        w, trace.tokens, f"{name}, tokens", "tokens_head", trace.key_tokens, boundary, view=view
    )
    return Words(((f"{name}, words", by_word), (f"{name}, tokens", by_token)), groups, key_groups, word_boundary)


@dataclass(frozen=True)
class Pairs(Drawn):
    """Where sentence B starts (`boundary`, found by `rule`), where the padding starts (`end`), and every head's
    block shares (`shares`: {block: [head]}); `table` has one row per head."""

    boundary: int = 0
    rule: str = ""
    end: int = 0
    shares: dict = field(default_factory=dict)

    @property
    def table(self) -> list[dict]:
        n_head = len(self.shares["crossing"])
        return [{"head": h, **{k: float(v[h]) for k, v in self.shares.items()}} for h in range(n_head)]


def pairs(
    trace: AttentionTrace,
    layer: int = 0,
    head: int = 0,
    view: str = "weights",
    boundary: int | None = None,
    where: str | None = None,
) -> Pairs:
    """A sentence pair (attnviz.trace(..., pair=...)): the four blocks per head, the crossing share, one head (of
    `view`: "weights" or "value-weighted"). boundary: where sentence B starts (default: found in the trace)."""
    rule = "given"
    if boundary is None:
        boundary, rule = P.pair_boundary(trace)
    if boundary is None:
        raise InputError(f"No boundary between two sentences in this trace ({rule}): trace a text with pair=.")
    end = P.real_length(trace.layer_mask(layer), trace.n_tokens)
    w = V.attention_view(trace, layer, view)  # every head: the blocks compare them all
    shares = P.block_shares(w, boundary, end)
    title = f"{where or trace.provenance.layer_label(layer)}, head {head}: {view}"
    out = (
        (f"The four blocks, every head of layer {layer}", pp.block_bars(shares, view=view)),
        ("Attention crossing between the sentences", pp.crossing_bars(shares["crossing"], view=view)),
        (
            "One head with the boundary",
            hp.weights_matrix(w[head], trace.tokens, title, "pair_head", trace.key_tokens, boundary, view=view),
        ),
    )
    return Pairs(out, boundary, rule, end, shares)
