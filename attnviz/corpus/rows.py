"""One text's whole attention rows, read in windows of queries across every layer, and what each statistic takes from
them.

A window is `trace.weights_tensor(layer, queries=window)` for every layer, stacked [layer, head, query, key] in float64
on the trace's device: the whole row of every query in it, never the top few keys. Its height is chosen so that a
window holds at most `CELLS` cells, so a long text never holds a layer of dense weights, let alone all of them.
Padding is left out as the per-text code leaves it out (`attnviz.analysis.heads`): only queries that may attend
something and are not padding are rows; a pad key is nobody's neighbour.

`TextSums` adds up, per layer x head, what the per-text statistics are means of; `TextSums.values()` gives one text's
statistics, which the corpus reducers average over texts.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ..analysis.heads import live_keys, query_rows
from ..trace import AttentionTrace

CELLS = 1 << 22  # [layer, head, query, key] float64 cells of one window: 32 MB
CLARK = ("entropy", "distance", "special", "punctuation", "sink")
OFFSETS = {"previous": -1, "next": 1, "self": 0}
PATTERNS = ("previous_score", "duplicate_score", "induction_score")


@dataclass
class Window:
    """Every layer's whole rows for queries start..stop-1 of one text."""

    weights: torch.Tensor  # [layer, head, w, key] float64
    start: int
    rows: torch.Tensor  # [layer, w] bool: the queries that count (not padding, may attend something)
    keys: torch.Tensor  # [layer, key] bool: the keys that are not padding
    norms: torch.Tensor | None  # [layer, head, key] ||v W_O[h]|| where the trace keeps values


def windows(trace: AttentionTrace, cells: int = CELLS):
    """Windows of queries covering the text, each holding at most `cells` cells (one query at least)."""
    n, n_keys, n_layer = trace.n_tokens, trace.n_keys, trace.n_layer
    square = n == n_keys
    masks = [trace.layer_mask(layer) for layer in range(n_layer)]
    rows = [np.ones(n, bool) if m is None else query_rows(m, square) for m in masks]
    keys = torch.as_tensor(np.stack([live_keys(m, n_keys) for m in masks]))
    norms = None
    if trace.has("values"):
        norms = torch.stack([trace.output_norms(layer, device=True) for layer in range(n_layer)]).double()
    height = max(1, cells // max(1, n_layer * trace.n_head * n_keys))
    for start in range(0, n, height):
        stop = min(n, start + height)
        with torch.inference_mode():
            w = [trace.weights_tensor(layer, queries=(start, stop)) for layer in range(n_layer)]
            weights = torch.stack(w).double()
        r = torch.as_tensor(np.stack([x[start:stop] for x in rows]))
        yield Window(weights, start, r.to(weights.device), keys.to(weights.device), norms)


def token_patterns(ids, start: int, stop: int, n_keys: int) -> dict:
    """bool [w, key] TransformerLens detection patterns of queries start..stop-1 (see attnviz.analysis.heads)."""
    ids = torch.as_tensor(np.asarray(ids, np.int64))
    i = torch.arange(start, stop)[:, None]
    j = torch.arange(n_keys)[None, :]
    same = ids[start:stop, None] == ids[None, :]
    after = torch.zeros_like(same)
    after[:, 1:] = ids[start:stop, None] == ids[None, :-1]
    return {"previous_score": j == i - 1, "duplicate_score": same & (j < i), "induction_score": after & (j <= i)}


def cell_sums(w: torch.Tensor, f: torch.Tensor) -> torch.Tensor:
    """[layer, head, feature]: sum over query and key of w [layer, head, query, key] x f [layer, query, key, feature]
    (a batched matrix product: several times faster than the same einsum on CPU)."""
    return torch.bmm(w.flatten(2), f.flatten(1, 2))


def xlogx(w: torch.Tensor) -> torch.Tensor:
    """w log w with 0 log 0 = 0."""
    return torch.special.xlogy(w, w)


#: Statistics that are a row's weights times a fixed [query, key] cell feature, summed: one einsum adds them all.
LINEAR = ("distance", "special", "punctuation", "sink", "previous", "next", "self")


class TextSums:
    """The sums one text's statistics are means of, per layer x head, added window by window.

    Every statistic but entropy is linear in the weights: sum over cells of w[q, k] * F[q, k, f] for a feature F that
    depends only on the positions, the tokens and the padding, so one window's sums are one einsum over F."""

    def __init__(self, n_layer: int, n_head: int, special, punct, ids, device, has_values: bool = False):
        self.has_values, self.ids = has_values, ids
        zeros = lambda *shape: torch.zeros(shape, dtype=torch.float64, device=device)  # noqa: E731
        self.special = torch.as_tensor(np.asarray(special, bool), device=device)
        self.punct = torch.as_tensor(np.asarray(punct, bool), device=device)
        self.linear, self.entropy = zeros(2, n_layer, n_head, len(LINEAR)), zeros(2, n_layer, n_head)
        self.rows, self.neighbours = zeros(n_layer), zeros(n_layer, len(OFFSETS))
        self.patterns = [name for name in PATTERNS if name == "previous_score" or len(ids)]
        self.hits, self.totals = zeros(n_layer, n_head, len(self.patterns)), zeros(n_layer, n_head)
        self.cells = torch.zeros(n_layer, len(self.patterns), dtype=torch.bool, device=device)

    def features(self, win: Window, n: int, n_keys: int) -> torch.Tensor:
        """[layer, query, key, len(LINEAR)] float64: each linear statistic's cell feature, zero on rows that do not
        count; a neighbour counts only where it is a live key."""
        dev = win.weights.device
        i = torch.arange(win.start, win.start + n, device=dev)[:, None]
        j = torch.arange(n_keys, device=dev)[None, :]
        cols = [(i - j).abs(), self.special[None, :], self.punct[None, :], j == 0, j == i - 1, j == i + 1, j == i]
        f = torch.stack([c.expand(n, n_keys).double() for c in cols], -1)[None] * win.rows[:, :, None, None]
        f[..., 4:] *= win.keys[:, None, :, None]
        return f

    def add(self, win: Window) -> None:
        w, rows = win.weights, win.rows
        n, n_keys = w.shape[2], w.shape[3]
        f = self.features(win, n, n_keys)
        views = [(0, w)]
        if win.norms is not None:
            vw = w * win.norms[:, :, None, :]
            views.append((1, vw / vw.sum(-1, keepdim=True).clamp(min=1e-300)))  # a row of zeros stays zeros
        for k, a in views:
            self.linear[k] += cell_sums(a, f)
            self.entropy[k] -= (xlogx(a) * rows[:, None, :, None]).sum((-1, -2))
        self.rows += rows.sum(-1)
        self.neighbours += f[..., 4:].sum((1, 2))
        kept = rows[:, :, None] & win.keys[:, None, :]  # [layer, query, key]
        ids = self.ids if len(self.ids) else np.zeros(n_keys)
        found = token_patterns(ids, win.start, win.start + n, n_keys)
        p = kept[..., None] & torch.stack([found[name].to(w.device) for name in self.patterns], -1)[None]
        self.hits += cell_sums(w, p.double())
        self.totals += cell_sums(w, kept.double()[..., None])[..., 0]
        self.cells |= p.flatten(1, 2).any(1)

    def values(self) -> tuple[dict, dict]:
        """(statistic -> [layer, head] float64 numpy of this text, statistic -> [layer, head] bool: defined here)."""
        out, defined = {}, {}
        shape = self.totals.shape
        for k, prefix in enumerate(("", "vw_")[: 1 + self.has_values]):
            for c, name in enumerate(("entropy", *LINEAR)):
                n = self.rows if c < 5 else self.neighbours[:, c - 5]
                total = self.entropy[k] if c == 0 else self.linear[k, :, :, c - 1]
                out[prefix + name] = total / n.clamp(min=1)[:, None]
                defined[prefix + name] = (n > 0)[:, None].expand(shape)
        for c, name in enumerate(self.patterns):
            ok = self.totals > 0
            out[name] = torch.where(ok, self.hits[..., c] / torch.where(ok, self.totals, 1.0), 0.0)
            defined[name] = self.cells[:, c][:, None].expand(shape)
        return ({k: v.cpu().numpy() for k, v in out.items()}, {k: v.cpu().numpy() for k, v in defined.items()})
