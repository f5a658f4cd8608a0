"""Mergeable partial states: what a profile keeps while it reads a corpus, in memory that does not grow with it.

Each reducer has `update(...)` (one text or one window of it), `merge(other)` and `result()`, and is kept as named
numpy arrays (`arrays()` / `from_arrays`) so a finished shard can be written and read back. Merging is exact for
counts, histograms and the bounded selections (a total order decides every tie), and a sum in a fixed order for the
means: a profile folds its shards' states in shard order, so one pass, a resumed run and a Ray run fold the same
numbers the same way.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from . import native
from .rows import xlogx

EMPTY_TEXT = np.iinfo(np.int64).max
#: On a CPU, the head distances' block of pairs holds at most this many cells: each float32 temporary (1 MB) then stays
#: in the core's cache across the five passes over it, 4 to 5 times faster than a block the size of a window (every
#: pass from memory). A GPU keeps `cells`: fewer, larger kernels.
CPU_BLOCK = 1 << 18
BLOCK_HEADS = 8


class Means:
    """Per statistic, the mean over texts of a [layer, head] per-text value, counting only texts where it is defined.

    Held as one stacked array of sums and one of counts [statistic, layer, head] (`names` in order), so a text is
    added in a few array operations whatever the number of statistics; `sums` and `counts` are their dicts."""

    def __init__(self, sums: dict | None = None, counts: dict | None = None):
        sums, counts = dict(sums or {}), dict(counts or {})
        self.names = tuple(sums)
        self._sums = np.stack([np.asarray(sums[n], np.float64) for n in self.names]) if sums else None
        self._counts = np.stack([np.asarray(counts[n], np.int64) for n in self.names]) if sums else None

    @property
    def sums(self) -> dict:
        return {} if self._sums is None else dict(zip(self.names, self._sums))

    @property
    def counts(self) -> dict:
        return {} if self._counts is None else dict(zip(self.names, self._counts))

    def update(self, values: dict, defined: dict) -> None:
        names = tuple(values)
        ok = np.stack([np.asarray(defined[n], bool) for n in names])
        v = np.where(ok, np.stack([values[n] for n in names]), 0.0)
        if self._sums is None:
            self.names, self._sums, self._counts = names, v, ok.astype(np.int64)
        elif names == self.names:
            self._sums += v
            self._counts += ok
        else:  # another set or order of statistics (no text of a profile gives one): name by name
            merged = self.merge(Means(dict(zip(names, v)), dict(zip(names, ok.astype(np.int64)))))
            self.names, self._sums, self._counts = merged.names, merged._sums, merged._counts

    def update_texts(self, names: tuple, values: np.ndarray, defined: np.ndarray) -> None:
        """values, defined [statistic, text, layer, head] of several texts, added text after text (as `update` would
        add them one by one: the same sums in the same order)."""
        if self._sums is None or names != self.names:
            for b in range(values.shape[1]):
                self.update(dict(zip(names, values[:, b])), dict(zip(names, defined[:, b])))
            return
        v = np.where(defined, values, 0.0)
        for b in range(values.shape[1]):
            self._sums += v[:, b]
            self._counts += defined[:, b]

    def merge(self, other: Means) -> Means:
        names = sorted(set(self.sums) | set(other.sums))
        return Means(
            {n: self.sums.get(n, 0.0) + other.sums.get(n, 0.0) for n in names},
            {n: self.counts.get(n, 0) + other.counts.get(n, 0) for n in names},
        )

    def result(self) -> dict:
        return {
            n: np.divide(s, self.counts[n], out=np.full(np.shape(s), np.nan), where=self.counts[n] > 0)
            for n, s in self.sums.items()
        }

    def arrays(self) -> dict:
        return {
            **{f"sum.{n}": np.asarray(v) for n, v in self.sums.items()},
            **{f"count.{n}": np.asarray(v) for n, v in self.counts.items()},
        }

    @classmethod
    def from_arrays(cls, a: dict) -> Means:
        return cls(
            {k[4:]: v for k, v in a.items() if k.startswith("sum.")},
            {k[6:]: v for k, v in a.items() if k.startswith("count.")},
        )


class Histogram:
    """Per layer x head, how many rows have their largest weight in each of `bins` equal bins of 0..1."""

    def __init__(self, counts: np.ndarray):
        self.counts = counts

    @classmethod
    def empty(cls, n_layer: int, n_head: int, bins: int) -> Histogram:
        return cls(np.zeros((n_layer, n_head, bins), np.int64))

    def update(self, maxw: np.ndarray, rows: np.ndarray) -> None:
        """maxw [layer, head, w]; rows [layer, w] bool."""
        bins = self.counts.shape[-1]
        b = np.minimum((maxw * bins).astype(np.int64), bins - 1)
        b = np.where(rows[:, None, :], b, bins)  # a padding row lands in a bin that is dropped
        flat = np.arange(b.shape[0] * b.shape[1])[:, None] * (bins + 1) + b.reshape(-1, b.shape[-1])
        counted = np.bincount(flat.ravel(), minlength=b.shape[0] * b.shape[1] * (bins + 1))
        self.counts += counted.reshape(*b.shape[:2], bins + 1)[..., :bins]

    def merge(self, other: Histogram) -> Histogram:
        return Histogram(self.counts + other.counts)

    def arrays(self) -> dict:
        return {"counts": self.counts}


class Divergence:
    """Jensen-Shannon divergence between every pair of heads (every layer), summed over the rows of every text."""

    def __init__(self, sums: np.ndarray, rows: np.ndarray):
        self.sums, self.rows = sums, rows

    @classmethod
    def empty(cls, n_heads: int) -> Divergence:
        return cls(np.zeros((n_heads, n_heads)), np.zeros((), np.int64))

    def update(self, weights: torch.Tensor, rows: torch.Tensor, cells: int, keep: torch.Tensor | None = None) -> None:
        """weights [layer, head, w, key]; rows [layer, w]: a row counts where it is a row in every layer (and is in
        `keep` [w] bool, the sampled rows, when given).

        Over a pair's rows, JS = H((p + q) / 2) - (H(p) + H(q)) / 2 with H((p + q) / 2) = (log 2 (sum p + sum q) -
        sum s log s) / 2 for s = p + q: the cells' one pass of logarithms is over s, the rest is per head. Pairs go
        in blocks of at most BLOCK_HEADS heads (a, b >= a: a block's few pairs below the diagonal are the waste)."""
        counts = rows.all(0) if keep is None else rows.all(0) & keep
        self.add(weights[:, :, counts].flatten(0, 1), cells)

    def add(self, rows: torch.Tensor, cells: int) -> None:
        """rows [layer x head, r, key]: the rows that count, of one text or of several (padded keys weigh 0).

        The cells are float32 and so is each row's sum over its keys (the C form sums a pair's cells in float64);
        the rows' sums are float64, so the error does not grow with the sample. A row's divergence is a small difference of such sums (each at most 2 log 2 + log
        keys): its float32 error, measured against float64 over the same weights, is 2e-8 at 40 keys and 4e-7 at
        2,000 (absolute, near-identical heads included), at half the cost of float64 cells (a vector holds
        twice as many cells, and a cell is half the memory)."""
        p = rows.float()
        n, r, k = p.shape
        if r == 0:
            return
        # -H(p) / 2 + log 2 (sum p) / 2 of each head
        per_head = rows_sum(xlogx(p), r, k, n) / 2 + rows_sum(p, r, k, n) * (math.log(2) / 2)
        slogs = native.pair_sums(p) if native.usable(p) else pair_sums(p, cells)
        upper = torch.triu(per_head[:, None] + per_head[None, :] - slogs / 2, 1)  # a head and itself: exactly 0
        self.sums += (upper + upper.T).cpu().numpy()
        self.rows += r

    def merge(self, other: Divergence) -> Divergence:
        return Divergence(self.sums + other.sums, self.rows + other.rows)

    def result(self) -> np.ndarray:
        """[heads, heads] mean JS divergence per row (natural log; Clark et al. sum it over rows, without a mean)."""
        return self.sums / max(1, int(self.rows))

    def arrays(self) -> dict:
        return {"sums": self.sums, "rows": self.rows}


def pair_sums(p: torch.Tensor, cells: int) -> torch.Tensor:
    """[heads, heads] float64: for heads a < b of p [heads, r, key], the sum over rows of each row's sum (float32)
    over keys of s log s for s = p[a] + p[b], in PyTorch's passes over blocks of heads (the C form:
    attnviz.corpus.native.pair_sums); at and below the diagonal: not to be read."""
    n, r, k = p.shape
    p = p.flatten(1)  # [heads, r x key]: a head's rows' cells
    cells = min(cells, CPU_BLOCK) if p.device.type == "cpu" else cells
    block = max(1, min(BLOCK_HEADS, cells // max(1, n * p.shape[1])))
    slogs = torch.zeros(n, n, dtype=torch.float64, device=p.device)
    for a in range(0, n, block):
        s = torch.add(p[a : a + block, None], p[None, a:])  # [block, n - a, r x key]
        slogs[a : a + block, a:] = rows_sum(xlogx(s, out=torch.empty_like(s)), r, k, *s.shape[:2])
    return slogs


def rows_sum(x: torch.Tensor, r: int, k: int, *lead: int) -> torch.Tensor:
    """[*lead] float64: the sum of x's r rows of k cells, each row's sum in float32, the rows' in float64."""
    return x.view(*lead, r, k).sum(-1).double().sum(-1)


def sampled_rows(seed: int, text: int, n: int, k: int) -> np.ndarray:
    """bool [n]: the k queries of a text (all when k is 0 or at least n) that head distances are averaged over, the k
    with the smallest seeded priority (drawn apart from the examples' priorities), so a sample does not depend on
    order, shards or workers either."""
    return sampled_rows_of(seed, [text], [n], k)[0]


def sampled_rows_of(seed: int, texts, lengths, k: int) -> list[np.ndarray]:
    """`sampled_rows` of several texts at once (their priorities drawn together)."""
    lengths = np.asarray(lengths, np.int64)
    if k <= 0:
        return [np.ones(n, bool) for n in lengths]
    group, query = (
        np.repeat(np.arange(len(lengths)), lengths),
        np.arange(lengths.sum()) - np.repeat(np.cumsum(lengths) - lengths, lengths),
    )
    prio = priorities_at(seed ^ 0x5EED, np.repeat(np.asarray(texts, np.int64), lengths), query, 1, 1)[0, 0]
    return np.split(ranked(group, prio, query) < k, np.cumsum(lengths)[:-1])


def ranked(group: np.ndarray, prio: np.ndarray, query: np.ndarray) -> np.ndarray:
    """Each cell's place within its group when the group is sorted by priority, ties by query (a stable sort)."""
    order = np.lexsort((query, prio, group))
    sizes = np.bincount(group, minlength=int(group.max()) + 1 if len(group) else 0)
    place = np.empty(len(group), np.int64)
    place[order] = np.arange(len(group)) - np.repeat(np.cumsum(sizes) - sizes, sizes)
    return place


def priorities_at(seed: int, texts: np.ndarray, queries: np.ndarray, n_layer: int, n_head: int) -> np.ndarray:
    """[layer, head, w]: a uniform number in [0, 1) for each (layer, head) and each (text, query) pair texts[c],
    queries[c] (one text's window, or texts read together), fixed by the seed alone (splitmix64), so a reservoir keeps
    the same rows whatever the order, the batches, the shards or the workers that read them."""
    layer = np.arange(n_layer, dtype=np.uint64)[:, None, None]
    head = np.arange(n_head, dtype=np.uint64)[None, :, None]
    query = np.asarray(queries).astype(np.uint64)[None, None, :]
    # array products wrap modulo 2^64 (as the mix means them to) without a warning
    base = np.uint64((int(seed) * 0x9E3779B97F4A7C15) & 0xFFFFFFFFFFFFFFFF) ^ (
        np.asarray(texts).astype(np.uint64) * np.uint64(0xBF58476D1CE4E5B9)
    )
    x = (
        base[None, None, :]
        ^ layer * np.uint64(0x94D049BB133111EB)
        ^ head * np.uint64(0xD6E8FEB86659FD93)
        ^ query * np.uint64(0xA0761D64)
    )
    for shift, mult in ((30, 0xBF58476D1CE4E5B9), (27, 0x94D049BB133111EB), (31, 1)):
        x = (x ^ (x >> np.uint64(shift))) * np.uint64(mult)
    return (x >> np.uint64(11)).astype(np.float64) / float(1 << 53)
