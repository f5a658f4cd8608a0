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
VALUE_WEIGHTED = tuple(f"vw_{name}" for name in (*CLARK, *OFFSETS))


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


def xlogx(w: torch.Tensor) -> torch.Tensor:
    return w * torch.log(torch.where(w > 0, w, torch.ones_like(w)))


class TextSums:
    """The sums one text's statistics are means of, per layer x head, added window by window."""

    def __init__(self, n_layer: int, n_head: int, special, punct, ids, device, has_values: bool = False):
        self.has_values = has_values
        shape = (n_layer, n_head)
        zero = lambda: torch.zeros(shape, dtype=torch.float64, device=device)  # noqa: E731
        self.special = torch.as_tensor(np.asarray(special, bool), device=device)
        self.punct = torch.as_tensor(np.asarray(punct, bool), device=device)
        self.ids = ids
        self.sums = {name: zero() for name in (*CLARK, *OFFSETS, *VALUE_WEIGHTED)}
        self.counts = {name: torch.zeros(n_layer, dtype=torch.float64, device=device) for name in ("rows", *OFFSETS)}
        self.hits = {name: zero() for name in PATTERNS if name == "previous_score" or len(ids)}
        self.totals = {name: zero() for name in self.hits}
        self.cells = {name: torch.zeros(n_layer, dtype=torch.bool, device=device) for name in self.hits}

    def add(self, win: Window) -> None:
        w, rows = win.weights, win.rows
        self.counts["rows"] += rows.sum(-1)
        self._clark(w, rows, win.start, "")
        if win.norms is not None:
            vw = w * win.norms[:, :, None, :]
            total = vw.sum(-1, keepdim=True)
            vw = torch.where(total > 0, vw / torch.where(total > 0, total, 1.0), 0.0)
            self._clark(vw, rows, win.start, "vw_")
        self._offsets(w, win, "", count=True)
        if win.norms is not None:
            self._offsets(vw, win, "vw_", count=False)
        self._patterns(w, win)

    def _clark(self, w: torch.Tensor, rows: torch.Tensor, start: int, prefix: str) -> None:
        wr = w * rows[:, None, :, None]
        i = torch.arange(start, start + w.shape[2], device=w.device, dtype=w.dtype)
        dist = (i[:, None] - torch.arange(w.shape[3], device=w.device, dtype=w.dtype)[None, :]).abs()
        self.sums[prefix + "entropy"] -= xlogx(wr).sum((-1, -2))
        self.sums[prefix + "distance"] += (wr * dist).sum((-1, -2))
        self.sums[prefix + "special"] += wr[..., self.special].sum((-1, -2))
        self.sums[prefix + "punctuation"] += wr[..., self.punct].sum((-1, -2))
        self.sums[prefix + "sink"] += wr[..., 0].sum(-1)

    def _offsets(self, w: torch.Tensor, win: Window, prefix: str, count: bool) -> None:
        n_keys = w.shape[3]
        i = torch.arange(win.start, win.start + w.shape[2], device=w.device)
        for name, offset in OFFSETS.items():
            j = i + offset
            inside = (j >= 0) & (j < n_keys)
            j = j.clamp(0, n_keys - 1)
            ok = win.rows & inside[None, :] & win.keys[:, j]
            cell = w[:, :, torch.arange(w.shape[2], device=w.device), j]  # [layer, head, w]
            self.sums[prefix + name] += (cell * ok[:, None, :]).sum(-1)
            if count:
                self.counts[name] += ok.sum(-1)

    def _patterns(self, w: torch.Tensor, win: Window) -> None:
        kept = win.rows[:, :, None] & win.keys[:, None, :]  # [layer, w, key]
        wk = w * kept[:, None]
        total = wk.sum((-1, -2))
        patterns = token_patterns(self.ids if len(self.ids) else np.zeros(w.shape[3]), win.start,
                                  win.start + w.shape[2], w.shape[3])  # fmt: skip
        for name in self.hits:
            p = patterns[name].to(w.device)
            self.hits[name] += wk[..., p].sum(-1)
            self.totals[name] += total
            self.cells[name] |= (kept & p).flatten(1).any(-1)

    def values(self) -> tuple[dict, dict]:
        """(statistic -> [layer, head] float64 numpy of this text, statistic -> [layer, head] bool: defined here)."""
        out, defined = {}, {}
        rows = self.counts["rows"][:, None]
        for name in self.sums:
            base = name.removeprefix("vw_")
            n = rows if base in CLARK else self.counts[base][:, None]
            if name.startswith("vw_") and not self.has_values:
                continue
            out[name] = self.sums[name] / n.clamp(min=1)
            defined[name] = (n > 0).expand_as(out[name])
        for name in self.hits:
            total = self.totals[name]
            out[name] = torch.where(total > 0, self.hits[name] / torch.where(total > 0, total, 1.0), 0.0)
            defined[name] = self.cells[name][:, None].expand_as(total)
        return ({k: v.cpu().numpy() for k, v in out.items()}, {k: v.cpu().numpy() for k, v in defined.items()})
