"""Examples per head, as HeadVis chooses them: the rows with the largest top weight, and a few rows drawn from each
interval of the top weight (0-0.2, 0.2-0.4, ... by default), each kept as (text id, query position, its strongest keys
with their weights). Both are bounded selections that merge exactly: every row has a rank (minus its top weight; a
seeded priority) and ties are broken by text id, then query, so any order of texts keeps the same rows.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from .reducers import EMPTY_TEXT, priorities

FIELDS = ("rank", "text", "query", "maxw", "keys", "kw")
SMALL = 1 << 16  # a window's candidate cells below which it is kept whole until the next selection
PENDING = 1 << 22  # candidate cells held before they are selected


@dataclass
class Kept:
    """The `cap` best rows of each [..., cap] slot: rank (smaller first), text, query, top weight, keys [..., cap, K]
    and their weights."""

    rank: np.ndarray
    text: np.ndarray
    query: np.ndarray
    maxw: np.ndarray
    keys: np.ndarray
    kw: np.ndarray

    @classmethod
    def empty(cls, shape: tuple, n_keys: int) -> Kept:
        return cls(
            np.full(shape, np.inf),
            np.full(shape, EMPTY_TEXT, np.int64),
            np.zeros(shape, np.int64),
            np.zeros(shape, np.float32),
            np.full((*shape, n_keys), -1, np.int32),
            np.zeros((*shape, n_keys), np.float32),
        )

    def merge(self, *others: Kept) -> Kept:
        """The `cap` best of this selection and others (of any cap, the same leading shape)."""
        cap, parts = self.rank.shape[-1], (self, *others)
        both = {f: np.concatenate([getattr(p, f) for p in parts], axis=self.rank.ndim - 1) for f in FIELDS}
        order = np.lexsort((both["query"], both["text"], both["rank"]), axis=-1)[..., :cap]
        pick = lambda a: np.take_along_axis(a, order if a.ndim == order.ndim else order[..., None], axis=order.ndim - 1)  # noqa: E731
        return Kept(**{f: pick(both[f]) for f in FIELDS})

    def arrays(self) -> dict:
        return {f: getattr(self, f) for f in FIELDS}


def candidates(rank: np.ndarray, text: int, start: int, maxw, top_keys, top_weights, cap: int) -> Kept:
    """The `cap` best rows of a window (rank [..., w]: inf where a row may not be chosen) with their keys.

    maxw [..., w]; top_keys / top_weights [..., w, K] broadcast to rank's leading shape."""
    query = np.broadcast_to(np.arange(start, start + rank.shape[-1]), rank.shape)
    order = np.lexsort((query, rank), axis=-1)[..., :cap]
    take = lambda a: np.take_along_axis(np.broadcast_to(a, rank.shape), order, -1)  # noqa: E731
    shape = (*rank.shape, top_keys.shape[-1])
    take_k = lambda a: np.take_along_axis(np.broadcast_to(a, shape), order[..., None], -2)  # noqa: E731
    chosen = take(rank)
    found = Kept(
        chosen,
        np.where(np.isfinite(chosen), text, EMPTY_TEXT),
        take(query),
        take(maxw).astype(np.float32),
        take_k(top_keys).astype(np.int32),
        take_k(top_weights).astype(np.float32),
    )
    if found.rank.shape[-1] < cap:  # a short text: fill with empty slots
        found = found.merge(Kept.empty((*rank.shape[:-1], cap - found.rank.shape[-1]), shape[-1]))
    return found


def chosen(rank: np.ndarray, text: int, start: int, maxw, top_keys, top_weights, cap: int) -> Kept:
    """A window's rows as candidates: every row of a short window as it is (selected later with many others, one
    selection for many texts), the `cap` best of a long one."""
    if rank.size * top_keys.shape[-1] > SMALL:
        return candidates(rank, text, start, maxw, top_keys, top_weights, cap)
    shape = (*rank.shape, top_keys.shape[-1])
    query = np.broadcast_to(np.arange(start, start + rank.shape[-1]), rank.shape)
    return Kept(
        rank,
        np.where(np.isfinite(rank), text, EMPTY_TEXT),
        query,
        np.broadcast_to(np.asarray(maxw, np.float32), rank.shape),
        np.broadcast_to(np.asarray(top_keys, np.int32), shape),
        np.broadcast_to(np.asarray(top_weights, np.float32), shape),
    )


class Examples:
    """Per layer x head: the `top` strongest rows, and `per_interval` rows drawn from each of `intervals` equal
    intervals of the top weight."""

    def __init__(self, strongest: Kept, drawn: Kept, seed: int):
        self._strongest, self._drawn, self.seed = strongest, drawn, seed
        self.pending: list[tuple[Kept, Kept]] = []  # candidates not merged yet: one selection for many short texts
        self.held = 0  # cells held by the pending candidates

    @property
    def strongest(self) -> Kept:
        self._flush()
        return self._strongest

    @property
    def drawn(self) -> Kept:
        self._flush()
        return self._drawn

    def _flush(self) -> None:
        if self.pending:
            top, drawn = zip(*self.pending)
            self.pending, self.held = [], 0
            self._strongest, self._drawn = self._strongest.merge(*top), self._drawn.merge(*drawn)

    @classmethod
    def empty(cls, n_layer, n_head, top=10, intervals=5, per_interval=3, n_keys=8, seed=0) -> Examples:
        return cls(
            Kept.empty((n_layer, n_head, top), n_keys),
            Kept.empty((n_layer, n_head, intervals, per_interval), n_keys),
            seed,
        )

    def update(self, weights: torch.Tensor, rows: torch.Tensor, text: int, start: int) -> None:
        """weights [layer, head, w, key] of one window of text `text`; rows [layer, w] bool."""
        n_keys = self._strongest.keys.shape[-1]
        k = min(n_keys, weights.shape[-1])
        top = torch.topk(weights, k, dim=-1)
        tw, tk = top.values.float().cpu().numpy(), top.indices.cpu().numpy()
        if k < n_keys:
            tw = np.concatenate([tw, np.zeros((*tw.shape[:-1], n_keys - k), np.float32)], -1)
            tk = np.concatenate([tk, np.full((*tk.shape[:-1], n_keys - k), -1)], -1)
        maxw, ok = tw[..., 0].astype(np.float64), rows.cpu().numpy()[:, None, :]
        rank = np.where(ok, -maxw, np.inf)
        top = chosen(rank, text, start, maxw, tk, tw, self._strongest.rank.shape[-1])
        n_int, per = self._drawn.rank.shape[-2:]
        bucket = np.minimum((maxw * n_int).astype(np.int64), n_int - 1)
        prio = priorities(self.seed, text, maxw.shape, start)
        rank = np.where(ok[:, :, None] & (bucket[:, :, None] == np.arange(n_int)[:, None]), prio[:, :, None], np.inf)
        self.pending.append((top, chosen(rank, text, start, maxw[:, :, None], tk[:, :, None], tw[:, :, None], per)))
        self.held += sum(k.keys.size for k in self.pending[-1])
        if self.held > PENDING:
            self._flush()

    def merge(self, other: Examples) -> Examples:
        return Examples(self.strongest.merge(other.strongest), self.drawn.merge(other.drawn), self.seed)

    def arrays(self) -> dict:
        return {
            **{f"top.{k}": v for k, v in self.strongest.arrays().items()},
            **{f"drawn.{k}": v for k, v in self.drawn.arrays().items()},
            "seed": np.asarray(self.seed),
        }

    @classmethod
    def from_arrays(cls, a: dict) -> Examples:
        strongest = Kept(**{f: a[f"top.{f}"] for f in FIELDS})
        return cls(strongest, Kept(**{f: a[f"drawn.{f}"] for f in FIELDS}), int(a["seed"]))

    def rows(self) -> list[dict]:
        """One dict per kept example: layer, head, kind ("strongest" or "interval i"), rank within it, text id, query,
        top weight, keys and their weights."""
        out = []
        for kind, kept in (("strongest", self.strongest), ("interval", self.drawn)):
            for idx in zip(*np.nonzero(kept.text != EMPTY_TEXT)):
                layer, head = int(idx[0]), int(idx[1])
                label = kind if kind == "strongest" else f"interval {int(idx[2])}"
                out.append(
                    {
                        "layer": layer,
                        "head": head,
                        "kind": label,
                        "order": int(idx[-1]),
                        "text_id": int(kept.text[idx]),
                        "query": int(kept.query[idx]),
                        "max_weight": float(kept.maxw[idx]),
                        "keys": [int(x) for x in kept.keys[idx] if x >= 0],
                        "key_weights": [float(w) for x, w in zip(kept.keys[idx], kept.kw[idx]) if x >= 0],
                    }
                )
        return out
