"""Examples per head, as HeadVis chooses them: the rows with the largest top weight, and a few rows drawn from each
interval of the top weight (0-0.2, 0.2-0.4, ... by default), each kept as (text id, query position, its strongest keys
with their weights). Both are bounded selections that merge exactly: every row has a rank (minus its top weight; a
seeded priority) and ties are broken by text id, then query, so any order of texts keeps the same rows.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from .reducers import EMPTY_TEXT, priorities_at

FIELDS = ("rank", "text", "query", "maxw", "keys", "kw")
PENDING = 1 << 22  # candidate cells held before they are selected
FLUSH = 16  # windows whose candidates are selected together (the thresholds rise as they are)


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


class RowKeys:
    """The strongest keys of the rows of a window that selections keep: each selection is built with its keys left
    blank, then `find` runs one topk per row length over the rows every selection kept (not over every row) and fills
    them in."""

    def __init__(self, rows: torch.Tensor, n_keys: int, flat, widths: np.ndarray):
        """rows [n, key]: the window's rows; flat(layer, head, column) -> their index there; widths [column]: each
        column's whole row length (keys past the window's hold weight 0; keys past it are another text's padding)."""
        self.rows, self.n_keys, self.flat, self.widths = rows, n_keys, flat, widths
        self.wanted: list[tuple[np.ndarray, Kept]] = []

    @classmethod
    def of_text(cls, weights: torch.Tensor, n_keys: int, width: int | None = None) -> RowKeys:
        """weights [layer, head, w, key] of one text: the first keys of rows `width` keys long (the rest weigh 0)."""
        n_layer, n_head, w, n_all = weights.shape
        return cls(
            weights.reshape(-1, n_all), n_keys, lambda y, h, c: (y * n_head + h) * w + c, np.full(w, width or n_all)
        )

    def selected(self, rank: np.ndarray, order: np.ndarray, text: np.ndarray, query: np.ndarray, maxw) -> Kept:
        """The rows `order` [..., c] of rank [..., w] (inf: may not be chosen) as a selection, keys still blank;
        text, query [w]: each column's text id and query position."""
        take = lambda a: np.take_along_axis(a, order, -1)  # noqa: E731
        ranks = take(rank)
        kept = Kept(
            ranks,
            np.where(np.isfinite(ranks), text[order], EMPTY_TEXT),
            query[order].astype(np.int64),
            take(maxw).astype(np.float32),
            np.full((*order.shape, self.n_keys), -1, np.int32),
            np.zeros((*order.shape, self.n_keys), np.float32),
        )
        self.wanted.append((order, kept))
        return kept

    def find(self) -> None:
        """Fill in the keys of every finite row of every selection made (layer and head lead every shape): each row's
        `n_keys` largest weights over exactly its own keys, equal weights (a causal row's zeros) lowest key first, so
        which keys it names depends neither on the window nor on torch's topk; one selection for every row at once."""
        flat, cols, where = [], [], []
        for order, kept in self.wanted:
            idx = np.nonzero(np.isfinite(kept.rank))
            flat.append(self.flat(idx[0], idx[1], order[idx]))
            cols.append(order[idx])
            where.append((kept, idx))
        rows = np.concatenate(flat)
        if rows.size == 0:
            return
        unique, inverse = np.unique(rows, return_inverse=True)
        widths = np.zeros(len(unique), np.int64)
        widths[inverse] = self.widths[np.concatenate(cols)]  # a row's whole length (the same wherever it is chosen)
        dev, most, n_all = self.rows.device, int(widths.max()), self.rows.shape[-1]
        chosen = self.rows[torch.as_tensor(unique, device=dev)][:, :most].float()
        if most > n_all:  # the whole rows, as their zeros rank among their keys
            chosen = torch.nn.functional.pad(chosen, (0, most - n_all))
        width = torch.as_tensor(widths, device=dev)[:, None]
        chosen.masked_fill_(torch.arange(most, device=dev) >= width, -math.inf)  # past a row's own keys: below all
        k = min(self.n_keys, most)
        keys, weights = strongest_keys(chosen, k)
        real = torch.arange(k, device=dev) < width  # a row shorter than k names its own keys only
        tk = np.full((rows.size, self.n_keys), -1, np.int32)
        tw = np.zeros((rows.size, self.n_keys), np.float32)
        tk[:, :k] = torch.where(real, keys, -1).cpu().numpy()[inverse]
        tw[:, :k] = torch.where(real, weights, 0.0).cpu().numpy()[inverse]
        at = 0
        for kept, idx in where:
            n = len(idx[0])
            kept.keys[idx] = tk[at : at + n]
            kept.kw[idx] = tw[at : at + n]
            at += n


def strongest_keys(x: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(keys, weights) [row, k]: each row's k largest values of x [row, key] float32, largest first, equal values
    lowest key first (a NaN above every number, as in torch.topk). Which of several equal values torch.topk names is
    its own affair (it varies with a row's length), so it ranks keys that cannot tie: a value's float32 bits made
    order-preserving integers, then the key (the lower first)."""
    if bool(x.isnan().any()):
        x = x.nan_to_num(nan=math.inf, posinf=math.inf, neginf=-math.inf)
    bits = x.contiguous().view(torch.int32)
    bits = torch.where(bits < 0, bits ^ 0x7FFFFFFF, bits).long()  # negative floats: their order reversed back
    last = (1 << 32) - 1 - torch.arange(x.shape[-1], device=x.device)
    keys = torch.topk(bits * (1 << 32) + last, k, dim=-1).indices
    return keys, x.gather(1, keys)


def first(a: np.ndarray, k: int, on: torch.device | None = None) -> np.ndarray:
    """The indices of the k smallest of `a` along its last axis, ties to the earlier index (a stable sort's first k),
    sorted by numpy, or on the device `on`: on a GPU the host's sort of every head's candidate rows was most of the
    examples' time (an 8B model: 1,024 heads' rows per window)."""
    if on is not None:
        return torch.sort(torch.as_tensor(a, device=on), dim=-1, stable=True).indices[..., :k].cpu().numpy()
    if k >= a.shape[-1]:
        return np.argsort(a, axis=-1, kind="stable")[..., :k]
    # each row's k-th smallest value; the values below it, then the earliest of those equal to it: k indices a row,
    # in index order, then sorted by value (stable): a sort of k values, not of the row (a stable sort of every
    # candidate row was most of the examples' time)
    kth = np.partition(a, k - 1, axis=-1)[..., k - 1 : k]
    tie = a == kth
    chosen = (a < kth) | (tie & (np.cumsum(tie, -1) <= k - (a < kth).sum(-1, keepdims=True)))
    at = np.nonzero(chosen)[-1].reshape(*a.shape[:-1], k)
    return np.take_along_axis(at, np.argsort(np.take_along_axis(a, at, -1), axis=-1, kind="stable"), -1)


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

    def update(self, weights: torch.Tensor, rows: torch.Tensor, text: int, start: int, maxw=None, width=None) -> None:
        """weights [layer, head, w, key] of one window of text `text`; rows [layer, w] bool; maxw [layer, head, w]
        float64 numpy, each row's largest weight (computed here if not given); width: the rows' whole length when
        `weights` holds their first keys only (the rest weigh 0)."""
        if maxw is None:
            maxw = weights.amax(-1).double().cpu().numpy()
        w = maxw.shape[-1]
        columns = (np.full(w, text, np.int64), start + np.arange(w))
        self.update_columns(RowKeys.of_text(weights, self._strongest.keys.shape[-1], width), rows, columns, maxw)

    def update_columns(self, keys: RowKeys, rows: torch.Tensor, columns: tuple, maxw: np.ndarray) -> None:
        """The rows of a window, of one text or several: keys (RowKeys) reads them; rows [layer, w] bool; columns:
        (text id [w], query position [w]) of each column, in (text, query) order (ties then go to the earlier
        column, as merging breaks them); maxw [layer, head, w] each row's largest weight.

        Rows are ranked on their largest weight (or their seeded priority) alone, and a row that ranks below what a
        head has kept already can never be chosen: only the others have their strongest keys found (topk over the
        few rows that can still be chosen, not over every row)."""
        cap, (n_int, per) = self._strongest.rank.shape[-1], self._drawn.rank.shape[-2:]
        ok = (rows.cpu().numpy() if isinstance(rows, torch.Tensor) else rows)[:, None, :]
        rank = np.where(ok & (-maxw <= self._strongest.rank[..., -1:]), -maxw, np.inf)
        bucket = np.minimum((maxw * n_int).astype(np.int64), n_int - 1)
        prio = priorities_at(self.seed, *columns, *maxw.shape[:2])
        inside = ok[:, :, None] & (bucket[:, :, None] == np.arange(n_int)[:, None])  # [layer, head, interval, w]
        drawn = np.where(inside & (prio[:, :, None] <= self._drawn.rank[..., -1:]), prio[:, :, None], np.inf)
        on = None if keys.rows.device.type == "cpu" else keys.rows.device
        best = first(rank, cap, on)  # ties: the earlier query, as merging breaks them
        picked = first(drawn, per, on)
        top = keys.selected(rank, best, *columns, maxw)
        found = keys.selected(drawn, picked, *columns, np.broadcast_to(maxw[:, :, None], drawn.shape))
        keys.find()
        self.pending.append((top, found))
        self.held += sum(k.keys.size for k in self.pending[-1])
        if len(self.pending) >= FLUSH or self.held > PENDING:
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

    def table(self):
        """Every kept example as a pyarrow Table (`example_schema`): layer, head, kind ("strongest" or "interval i"),
        rank within it, text id, query, top weight, and the keys a row names with their weights. Built column by
        column from the selections' arrays: a profile keeps tens of thousands of examples, and a dict and two lists
        for each were most of the Python objects a profile made (each one a full collection of the garbage
        collector's oldest generation every few profiles, in a process that runs many)."""
        import pyarrow as pa

        parts = [self._columns("strongest", self.strongest), self._columns("interval", self.drawn)]
        cols = {name: np.concatenate([p[name] for p in parts]) for name in parts[0]}
        schema = example_schema()
        offsets = pa.array(np.concatenate([[0], np.cumsum(cols["named"])]).astype(np.int32))
        arrays = [
            pa.ListArray.from_arrays(offsets, pa.array(cols[f.name], f.type.value_type))  # a row's named keys
            if pa.types.is_list(f.type)
            else pa.array(cols[f.name], f.type)
            for f in schema
        ]
        return pa.Table.from_arrays(arrays, schema=schema)

    @staticmethod
    def _columns(kind: str, kept: Kept) -> dict:
        """The kept rows of one selection as numpy columns (keys and key_weights flat, `named` of them a row)."""
        idx = np.nonzero(kept.text != EMPTY_TEXT)
        keys = kept.keys[idx]
        named = keys >= 0  # RowKeys.find names a row's keys first, -1 after them
        if kind == "strongest":
            labels = np.full(len(idx[0]), kind, dtype=object)
        else:
            labels = np.array([f"{kind} {i}" for i in range(kept.rank.shape[-2])], dtype=object)[idx[2]]
        return {
            "layer": idx[0].astype(np.int64),
            "head": idx[1].astype(np.int64),
            "kind": labels,
            "order": idx[-1].astype(np.int64),
            "text_id": kept.text[idx].astype(np.int64),
            "query": kept.query[idx].astype(np.int64),
            "max_weight": kept.maxw[idx].astype(np.float64),
            "keys": keys[named].astype(np.int64),
            "key_weights": kept.kw[idx][named].astype(np.float64),
            "named": named.sum(-1),
        }

    def rows(self) -> list[dict]:
        """`table()` as one dict per kept example."""
        return self.table().to_pylist()


def example_schema():
    """The examples table's columns (attnviz.corpus.store writes it as examples.parquet)."""
    import pyarrow as pa

    return pa.schema(
        [
            ("layer", pa.int64()),
            ("head", pa.int64()),
            ("kind", pa.string()),
            ("order", pa.int64()),
            ("text_id", pa.int64()),
            ("query", pa.int64()),
            ("max_weight", pa.float64()),
            ("keys", pa.list_(pa.int64())),
            ("key_weights", pa.list_(pa.float64())),
        ]
    )


def examples_from_rows(rows: list[dict]):
    """The examples table of rows given as dicts (`Examples.rows`' form): a HeadProfile built by hand."""
    import pyarrow as pa

    return pa.Table.from_pylist(rows, schema=example_schema())
