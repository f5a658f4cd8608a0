"""Attention sinks: how much of a head's attention goes to a few keys that carry little meaning, and what its rows
look like without them.

Many heads give most of each row to the first token when nothing else in the row matters to them: the softmax must
put its weight somewhere, and a token every query can see is a cheap place to park it. gpt-oss and Inkling 2 make this
explicit with a learned sink, a logit in every row's softmax that belongs to no key, so a row's weights sum to less
than 1. Both kinds are measured here on one scale, the share of a row's attention the sink took, so one picture can
show them side by side.

Every number is exact: a key's share is read one column at a time (`AttentionTrace.column`), each row's softmax
taken over all its keys, and rows that may not see the sink (padding, rows the mask empties) are left out of means.
"""

from __future__ import annotations

import itertools

import numpy as np

from .. import checks
from ..errors import InputError, check_index
from ..trace import AttentionTrace

QUERY_CHUNK = 256  # query rows read at a time for the learned sink: memory grows with the tokens, not their square


def sink_keys(trace: AttentionTrace, keys=(0,)) -> tuple[int, ...]:
    """`keys` checked against the trace's keys, sorted and without repeats (negative counts from the end)."""
    if isinstance(keys, (str, bytes)) or not hasattr(keys, "__iter__"):
        raise checks.ArgumentTypeError("keys", f"keys must be a list of key positions, not {type(keys).__name__}.")
    keys = list(itertools.islice(iter(keys), trace.n_keys + 1))
    if len(keys) > trace.n_keys:
        raise checks.ArgumentError("keys", f"keys lists more than the {trace.n_keys} keys there are.")
    checked = sorted({check_index("keys", k, trace.n_keys) for k in keys})
    if not checked:
        raise InputError("Choose at least one key as the sink.")
    return tuple(checked)


def reading_rows(trace: AttentionTrace, layer: int, keys=(0,)) -> np.ndarray:
    """bool [query]: the query rows a sink share is averaged over, those that may see at least one of `keys`.

    Padding is left out: in self-attention a padded position is a key no query may see, and its own row is not a
    token of the text. Given weights carry no mask: every row counts."""
    mask = trace.layer_mask(layer)
    if mask is None:
        return np.ones(trace.n_tokens, bool)
    rows = mask[:, list(keys)].any(axis=1)
    if trace.key_tokens == trace.tokens:
        rows &= mask.any(axis=0)  # position i is padding when no query may see key i
    return rows


@checks.public(name="attnviz.analysis.sinks.sink_share")
def sink_share(trace: AttentionTrace, keys=(0,)) -> np.ndarray:
    """float32 [layer, head]: the mean, over the query rows that may see `keys` (padding and masked rows left out),
    of the weight those rows give to `keys` together. NaN for a layer where no row may see them."""
    keys = sink_keys(trace, keys)
    out = np.full((trace.n_layer, trace.n_head), np.nan, np.float32)
    for layer in range(trace.n_layer):
        rows = reading_rows(trace, layer, keys)
        if rows.any():
            share = sum(trace.column(layer, k).astype(np.float64) for k in keys)  # [head, query]
            out[layer] = share[:, rows].mean(axis=-1)
    return out


def learned_sink_share(trace: AttentionTrace) -> np.ndarray:
    """float32 [layer, head]: the mean share of a row that a learned sink took (1 - the row's sum of weights), over
    the rows that see any key; NaN for a layer without a learned sink (its rows sum to 1)."""
    out = np.full((trace.n_layer, trace.n_head), np.nan, np.float32)
    for layer in range(trace.n_layer):
        facts = trace.facts(layer)
        if facts.sinks is None:
            continue
        rows = facts.mask.any(axis=1)
        if trace.key_tokens == trace.tokens:
            rows &= facts.mask.any(axis=0)
        taken = np.zeros((trace.n_head, trace.n_tokens))
        for a in range(0, trace.n_tokens, QUERY_CHUNK):
            w = trace.stages(layer, queries=(a, a + QUERY_CHUNK)).weights
            taken[:, a : a + w.shape[1]] = 1.0 - w.sum(axis=-1, dtype=np.float64)
        if rows.any():
            out[layer] = taken[:, rows].mean(axis=-1)
    return out


def without_keys(weights: np.ndarray, keys=(0,)) -> np.ndarray:
    """`weights` [..., key] with the `keys` columns set to 0 and each row renormalised over the other keys: where a
    head looks once its sink is taken away. A row that gave everything to `keys` stays all zero."""
    w = np.array(weights, dtype=np.float64)
    w[..., list(keys)] = 0.0
    total = w.sum(axis=-1, keepdims=True)
    return np.divide(w, total, out=np.zeros_like(w), where=total > 0).astype(np.float32)


def has_learned_sinks(trace: AttentionTrace, layer: int) -> bool:
    """True when `layer` puts a learned sink logit in every row's softmax (gpt-oss, Inkling 2)."""
    return trace.facts(layer).sinks is not None


def learned_sink_by_query(trace: AttentionTrace, layer: int, head: int) -> np.ndarray | None:
    """float64 [query]: the share of each query's attention the learned sink took, 1 - the row's sum of weights.

    None when the layer has no learned sink (its rows sum to 1) or the trace has only weights."""
    if not has_learned_sinks(trace, layer):
        return None
    taken = np.zeros(trace.n_tokens)
    for a in range(0, trace.n_tokens, QUERY_CHUNK):
        w = trace.stages(layer, heads=head, queries=(a, a + QUERY_CHUNK)).weights[0]
        taken[a : a + w.shape[0]] = 1.0 - w.sum(axis=-1, dtype=np.float64)
    return taken


def window_without_keys(trace: AttentionTrace, layer: int, queries=None, keys=None, sinks=(0,)) -> np.ndarray:
    """float32 [head, query, key] of a window: the weights with the `sinks` keys removed and each row renormalised over
    all its other keys (`without_keys` of the whole rows, then the window's keys), so a key window reads as the rows
    do. Whole rows of the window's queries are read: at most a window of queries times every key."""
    keys = (0, trace.n_keys) if keys is None else keys
    rows = without_keys(trace.stages(layer, queries=queries).weights, sink_keys(trace, sinks))
    return rows[..., max(0, keys[0]) : keys[1]]
