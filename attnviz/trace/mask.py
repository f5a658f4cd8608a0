"""A boolean attention mask [query, key] kept by its structure, so it grows with the tokens, not their square.

Masks that models use are a band around the diagonal (causal: no key ahead of the query; a sliding window: no key
more than `behind` positions back) cut by a set of visible keys (padding, hidden tokens). `StructuredMask` stores
exactly that: the band's two limits, a bool [key] vector, and the cells where the real mask differs from them (a
short sorted list of flat indices), or the whole dense array when no structure fits. `recognise` reads a captured dense
mask once and keeps the structure only after checking it cell by cell against the mask, so correctness never rests on
a guess. Windows of rows, one column or the whole mask are materialised on request, on the mask's device.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

ALL = slice(None)
CHUNK_CELLS = 2**24  # mask cells read at once while recognising (16 MB of bool): memory stays linear in the tokens


@dataclass(frozen=True, eq=False)
class StructuredMask:
    """bool [query, key], True = may attend: query i sees key j when -behind <= j - i <= ahead and keys[j], except
    at the `flips` cells (flat indices i * n_key + j, where the mask is the opposite); `cells` holds the whole mask
    instead when nothing else fits. None for a limit or the keys means no limit."""

    n_query: int
    n_key: int
    device: torch.device
    ahead: int | None = None  # 0: causal (no key after the query's own position)
    behind: int | None = None  # a sliding window of behind + 1 keys
    keys: torch.Tensor | None = None  # bool [key]
    flips: torch.Tensor | None = None  # int64 [cells], sorted
    cells: torch.Tensor | None = None  # bool [query, key]: the dense fallback

    shape = property(lambda self: (self.n_query, self.n_key))
    causal = property(lambda self: self.cells is None and self.ahead == 0)
    window = property(lambda self: None if self.behind is None or self.cells is not None else self.behind + 1)
    is_dense = property(lambda self: self.cells is not None)

    @property
    def kind(self) -> str:
        """'all' (every cell visible), 'causal' (exactly the lower triangle) or 'other'."""
        if self.cells is not None or self.flips is not None or self.keys is not None or self.behind is not None:
            return "other"
        return "all" if self.ahead is None else "causal" if self.ahead == 0 else "other"

    def rows(self, queries: slice = ALL, keys: slice = ALL) -> torch.Tensor:
        """bool [query window, key window]: only these cells are materialised."""
        (a, b), (c, d) = _bounds(queries, self.n_query), _bounds(keys, self.n_key)
        if self.cells is not None:
            return self.cells[a:b, c:d]
        out = torch.ones(b - a, d - c, dtype=torch.bool, device=self.device)
        if self.ahead is not None:  # row i keeps keys j <= i + ahead
            out.tril_(a + self.ahead - c)
        if self.behind is not None:  # and keys j >= i - behind
            out.triu_(a - self.behind - c)
        if self.keys is not None:
            out &= self.keys[c:d]
        if self.flips is not None:
            self._flip(out, a, b, c, d)
        return out

    def _flip(self, out: torch.Tensor, a: int, b: int, c: int, d: int) -> None:
        lo, hi = torch.searchsorted(self.flips, torch.tensor([a * self.n_key, b * self.n_key], device=self.device))
        cells = self.flips[lo:hi]
        i, j = cells // self.n_key - a, cells % self.n_key
        inside = (j >= c) & (j < d)
        out[i[inside], j[inside] - c] ^= True

    def column(self, key: int) -> torch.Tensor:
        """bool [query]: which queries may attend `key`."""
        return self.rows(ALL, slice(key, key + 1))[:, 0]

    def dense(self) -> torch.Tensor:
        """The whole bool [query, key] mask (small traces, tests, files)."""
        return self.rows()

    def key_span(self, queries: slice = ALL) -> tuple[int, int]:
        """(lo, hi): every key outside lo..hi-1 is hidden from every query of the window (the band's reach)."""
        a, b = _bounds(queries, self.n_query)
        if self.cells is not None or self.flips is not None or a >= b:
            return 0, self.n_key
        lo = 0 if self.behind is None else max(0, a - self.behind)
        hi = self.n_key if self.ahead is None else min(self.n_key, b + self.ahead)
        return (lo, hi) if hi > lo else (0, self.n_key)  # a band that reaches no key: the rows hold only the fill

    def tensors(self) -> tuple[torch.Tensor, ...]:
        return tuple(t for t in (self.keys, self.flips, self.cells) if t is not None)

    @property
    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in self.tensors())

    def same_as(self, other: StructuredMask) -> bool:
        """Whether `other` stores the very same structure (so a later layer can share this one)."""
        fields = ("n_query", "n_key", "ahead", "behind")
        if any(getattr(self, f) != getattr(other, f) for f in fields) or self.device != other.device:
            return False
        return all(_same(getattr(self, f), getattr(other, f)) for f in ("keys", "flips", "cells"))


def _same(a: torch.Tensor | None, b: torch.Tensor | None) -> bool:
    return (a is None and b is None) or (a is not None and b is not None and a.shape == b.shape and torch.equal(a, b))


def _bounds(window: slice, n: int) -> tuple[int, int]:
    start, stop, _ = window.indices(n)
    return start, max(start, stop)


def _chunks(n_query: int, n_key: int):
    step = max(1, CHUNK_CELLS // max(1, n_key))
    return ((a, min(n_query, a + step)) for a in range(0, n_query, step))


SAMPLED_ROWS = 2048  # rows whose first and last visible key propose the band (every row is checked afterwards)


def _stats(mask: torch.Tensor):
    """(keys any query sees [key], evenly spaced rows that see a key, the first and the last key each sees): what
    proposes a structure. Only a proposal: `recognise` then compares it with every cell."""
    n_query, n_key = mask.shape
    seen = torch.zeros(n_key, dtype=torch.uint8, device=mask.device)
    for a, b in _chunks(n_query, n_key):
        seen = torch.maximum(
            seen, mask[a:b].view(torch.uint8).amax(0)
        )  # uint8 reductions run vectorised, bool ones not
    step = max(1, n_query // SAMPLED_ROWS)
    idx = torch.unique(torch.cat([torch.arange(0, n_query, step), torch.tensor([n_query - 1])])).to(mask.device)
    rows = mask[idx].to(torch.uint8)
    live = rows.amax(-1) > 0
    idx, rows = idx[live], rows[live]
    first, last = rows.argmax(-1), n_key - 1 - rows.flip(-1).argmax(-1)
    return seen.bool(), idx, first, last


def candidate(mask: torch.Tensor, robust: bool = False) -> StructuredMask:
    """The simplest band-and-keys structure consistent with what `mask` shows: the band reaches as far as the
    farthest sampled row does, or (robust) as far as most rows that stop short of the visible keys' ends do, so a few
    odd cells do not widen it."""
    n_query, n_key = mask.shape
    seen, idx, first, last = _stats(mask)
    keys = None if bool(seen.all()) else seen
    if idx.numel() == 0:  # no query sees any key
        return StructuredMask(n_query, n_key, mask.device, keys=seen)
    valid = torch.nonzero(seen).flatten()
    lo, hi = int(valid[0]), int(valid[-1])
    if robust:
        ahead, behind = _most_common((last - idx)[last < hi]), _most_common((idx - first)[first > lo])
    else:
        ahead, behind = int((last - idx).max()), int((idx - first).max())
        ahead = None if ahead >= hi else ahead  # row 0 already sees the last visible key: the limit cuts nothing
        behind = None if behind >= n_query - 1 - lo else behind
    return StructuredMask(n_query, n_key, mask.device, ahead=ahead, behind=behind, keys=keys)


def _most_common(t: torch.Tensor) -> int | None:
    return None if t.numel() == 0 else int(torch.mode(t).values)


def _differences(found: StructuredMask, mask: torch.Tensor, most: int) -> torch.Tensor | None:
    """The flat indices of the cells where `found` and `mask` differ, sorted; None when there are more than `most`."""
    n_query, n_key = mask.shape
    flips, count = [], 0
    for a, b in _chunks(n_query, n_key):
        differ = torch.nonzero((found.rows(slice(a, b)) != mask[a:b]).flatten()).flatten()
        count += differ.numel()
        if count > most:
            return None
        flips.append(differ + a * n_key)
    return torch.cat(flips)


def recognise(mask: torch.Tensor, max_flips: int | None = None) -> StructuredMask:
    """`mask` (bool [query, key]) as a StructuredMask that equals it cell for cell: a band and visible keys, plus up to
    `max_flips` exceptions (default: query + key cells), else the dense mask itself (copied, so it holds no view of
    a larger buffer)."""
    mask = mask.to(torch.bool)
    n_query, n_key = mask.shape
    max_flips = n_query + n_key if max_flips is None else max_flips
    best, flips = None, None
    for robust in (False, True):  # the second proposal only when the first needs exceptions
        found = candidate(mask, robust)
        differ = _differences(found, mask, max_flips if flips is None else flips.numel() - 1)
        if differ is not None:
            best, flips = found, differ
        if flips is not None and flips.numel() == 0:
            return best
    if best is None:
        return StructuredMask(n_query, n_key, mask.device, cells=mask.clone())
    return StructuredMask(n_query, n_key, mask.device, best.ahead, best.behind, best.keys, flips)


def as_structured(mask) -> StructuredMask:
    """A StructuredMask as it is; a bool [query, key] tensor or array recognised."""
    return mask if isinstance(mask, StructuredMask) else recognise(torch.as_tensor(mask, dtype=torch.bool))
