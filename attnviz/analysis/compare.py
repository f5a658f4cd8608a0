"""Compare: two attention patterns of the same shape, head by head (a minimal pair, two models, two layers).

For weights a, b [head, query, key] (the same positions; or value-weighted attention, `values.VIEWS`): the difference b - a, and per head how much it
changed: the mean and the largest |b - a| over cells, and the Jensen-Shannon divergence of each query's row
(in nats, 0 = the same distribution, at most ln 2), averaged over the rows where either side attends at all.
Heads are ranked by the measure the caller picks.

Two sentences compare cell by cell only when they have the same number of tokens (a minimal pair, one word
swapped for another single-token word, usually does); otherwise `check_comparable` says why not. `minimal_pair`
makes sentence b from sentence a by swapping one word, checked with the model's own tokenizer, so the default pair
works for any vocabulary (WordPiece, byte-level BPE, SentencePiece).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from .. import checks
from ..errors import InputError
from ..trace import AttentionTrace
from ..trace.window_cache import remembered
from .values import VALUE_WEIGHTED, attention_view

MEASURES = {
    "mean_abs": "mean |difference| over the head's cells",
    "max_abs": "largest |difference| in the head",
    "js": "Jensen-Shannon divergence of each query's row (nats), averaged over the rows",
}


@dataclass(frozen=True)
class Comparison:
    """b - a per head, and how much each head changed (one [head] array per measure of MEASURES)."""

    diff: np.ndarray | None  # [head, query, key], b - a (of a window when asked; None: the measures only)
    change: dict

    def ranked(self, measure: str = "mean_abs") -> list[int]:
        """Heads, the most changed first."""
        return [int(h) for h in np.argsort(-self.change[measure], kind="stable")]

    def rows(self, measure: str = "mean_abs") -> list[dict]:
        """One dict per head in ranked order: the page's table."""
        return [
            {"rank": r + 1, "head": h, **{k: float(v[h]) for k, v in self.change.items()}}
            for r, h in enumerate(self.ranked(measure))
        ]


def js_divergence(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Jensen-Shannon divergence (nats) between rows of p and q [..., key] (each a distribution; 0 log 0 = 0).

    As entropies, (p log p + q log q) / 2 - m log m summed over the keys, m = (p + q) / 2, which is
    (KL(p||m) + KL(q||m)) / 2; rounding below 0 is clipped."""
    p, q = np.asarray(p, np.float64), np.asarray(q, np.float64)
    m = 0.5 * (p + q)
    return np.maximum(0.5 * (_xlogx(p) + _xlogx(q)) - _xlogx(m), 0.0)


def _xlogx(x: np.ndarray) -> np.ndarray:
    """x log x summed over the last axis, with 0 log 0 = 0."""
    return (x * np.log(np.where(x > 0, x, 1.0))).sum(axis=-1)


ROWS = 64  # query rows taken at a time: float64 blocks that stay in cache (a whole layer in float64 at 2,048 tokens
# is 134 MB an array, and its temporaries made the comparison ten times slower)


def compare_layers(a: np.ndarray, b: np.ndarray, keep_diff: bool = True) -> Comparison:
    """Head-by-head comparison of weights a and b [head, query, key] of the same shape, in float64, a block of query
    rows at a time. keep_diff=False: the measures only (`diff` None), for callers that never draw the difference."""
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape:
        raise InputError(f"Cannot compare attention of shapes {a.shape} and {b.shape}: heads and tokens must match.")
    n_head, n_query = a.shape[0], a.shape[1]
    total, largest, js = np.zeros(n_head), np.zeros(n_head), np.zeros((n_head, n_query))
    live = np.zeros((n_head, n_query), bool)  # rows that attend somewhere (fully masked rows are all 0)
    for h in range(n_head):
        for i in range(0, n_query, ROWS):
            p, q = np.asarray(a[h, i : i + ROWS], np.float64), np.asarray(b[h, i : i + ROWS], np.float64)
            d = np.abs(q - p)
            total[h] += d.sum()
            largest[h] = max(largest[h], d.max(initial=0.0))
            js[h, i : i + ROWS] = js_divergence(p, q)
            live[h, i : i + ROWS] = (p.sum(-1) > 0) | (q.sum(-1) > 0)
    js_mean = np.array([js[h][live[h]].mean() if live[h].any() else 0.0 for h in range(n_head)])
    change = {"mean_abs": total / max(1, a[0].size), "max_abs": largest, "js": js_mean}
    return Comparison(np.subtract(b, a, dtype=np.float64) if keep_diff else None, change)


def check_comparable(a: AttentionTrace, b: AttentionTrace, what: str = "two sentences", pooled: bool = False) -> None:
    """An InputError saying why two traces cannot be compared cell by cell (token counts differ, or head counts when
    the heads are to be paired rather than `pooled`)."""
    if (a.n_tokens, a.n_keys) != (b.n_tokens, b.n_keys):
        raise InputError(
            f"The {what} give {a.n_tokens:,} and {b.n_tokens:,} tokens: a cell-by-cell difference needs the same "
            "positions. Use a minimal pair (swap one word for another that is also a single token)."
        )
    if a.n_head != b.n_head and not pooled:
        raise InputError(
            f"The {what} have {a.n_head} and {b.n_head} heads: heads cannot be paired; compare each "
            "layer's heads averaged instead."
        )


def heads_pair(a: AttentionTrace, b: AttentionTrace) -> bool:
    """Whether head h of a can be set against head h of b (the same number of heads)."""
    return a.n_head == b.n_head


@remembered
def compare_traces(
    a: AttentionTrace,
    b: AttentionTrace,
    layer_a: int,
    layer_b: int | None = None,
    what: str = "two sentences",
    view: str = "weights",
    pooled: bool = False,
    window=None,
) -> Comparison:
    """Compare layer_a of trace a with layer_b (default the same) of trace b, after `check_comparable`.

    view: one of values.VIEWS; value-weighted attention needs both traces to keep values (an InputError names the
    one that does not, and why). pooled: each side's heads averaged into one pattern first (rows still sum to 1), so
    models of different head counts or widths compare layer by layer; the result has one "head", the average.
    window: ((query start, stop), (key start, stop)): `diff` holds only those cells (what a page draws: kept for every
    session, it is a few hundred KB instead of [head, query, key] float64, 128 MB at 2,048 tokens); the measures
    still cover every cell. None: the whole diff."""
    check_comparable(a, b, what, pooled)
    if view == VALUE_WEIGHTED:
        for side, trace in (("a", a), ("b", b)):
            if not trace.has("values"):
                raise InputError(
                    f"Value-weighted attention needs the values of both sides; {side} ({what}) has "
                    f"none. {trace.why_not('values')} Compare the weights instead."
                )
    layer_b = layer_a if layer_b is None else layer_b
    if window is not None:  # checked before any work
        (q0, q1), (k0, k1) = checks.inside_cells("window", window, a.n_tokens, a.n_keys)
    wa, wb = attention_view(a, layer_a, view), attention_view(b, layer_b, view)
    if pooled:
        wa, wb = wa.mean(axis=0, keepdims=True), wb.mean(axis=0, keepdims=True)
    if window is None:
        return compare_layers(wa, wb)
    change = compare_layers(wa, wb, keep_diff=False).change
    return Comparison(np.subtract(wb[:, q0:q1, k0:k1], wa[:, q0:q1, k0:k1], dtype=np.float64), change)


#: Swaps for a minimal pair (either way round): common words, one token each in the usual vocabularies; the
#: tokenizer still has the last word (`minimal_pair` keeps a swap only if the token count stays the same).
SWAP_PAIRS = (
    ("cat", "dog"),
    ("he", "she"),
    ("his", "her"),
    ("man", "woman"),
    ("boy", "girl"),
    ("big", "small"),
    ("good", "bad"),
    ("is", "was"),
    ("this", "that"),
)
FALLBACK_WORDS = ("dog", "cat", "man", "it")  # tried in place of each word when no swap above applies
MAX_TRIES = 32  # tokenizer calls at most: a long sentence is not searched word by word forever


def minimal_pair(text: str, count) -> tuple[str, str, str] | None:
    """(sentence b, the word swapped out, the word swapped in): `text` with one word replaced so that
    `count(b) == count(text)`, where count gives the model's token count of a text; None when no swap within
    MAX_TRIES keeps it. Words of SWAP_PAIRS go first (cat -> dog), then FALLBACK_WORDS in each word's place."""
    swaps = {a: b for pair in SWAP_PAIRS for a, b in (pair, pair[::-1])}
    words = list(re.finditer(r"[A-Za-z]+", text))
    tries = [(m, swaps[m.group().lower()]) for m in words if m.group().lower() in swaps]
    tries += [(m, w) for m in words for w in FALLBACK_WORDS if w != m.group().lower()]
    want = count(text)
    for m, new in tries[:MAX_TRIES]:
        new = new.capitalize() if m.group()[0].isupper() else new
        b = text[: m.start()] + new + text[m.end() :]
        if count(b) == want:
            return b, m.group(), new
    return None


def short_number(value: float) -> str:
    """Three significant digits, so a small change reads 0.000412 (or 4.12e-05), never 0.000."""
    return f"{float(value):.3g}"


def changed_tokens(a: AttentionTrace, b: AttentionTrace) -> list[int]:
    """Positions where the two traces' tokens differ (the swapped word of a minimal pair)."""
    return [i for i, (x, y) in enumerate(zip(a.tokens, b.tokens)) if x != y]
