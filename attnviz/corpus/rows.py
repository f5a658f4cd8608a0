"""One text's whole attention rows, read in windows of queries across every layer, and what each statistic takes from
them.

A window is `trace.weights_tensor(layer, queries=window)` for every layer, stacked [layer, head, query, key] in float32
(the trace's own numbers) on the trace's device: the whole row of every query in it, never the top few keys. Its height is chosen so that a
window holds at most `CELLS` cells, so a long text never holds a layer of dense weights, let alone all of them.
Padding is left out as the per-text code leaves it out (`attnviz.analysis.heads`): only queries that may attend
something and are not padding are rows; a pad key is nobody's neighbour.

`TextSums` adds up, per layer x head, what the per-text statistics are means of; `TextSums.values()` gives one text's
statistics, which the corpus reducers average over texts. Each row's sums are taken in float32 (a row is at most a few
thousand keys: a relative error near 1e-7) and the rows' sums in float64; float32 is what makes a profile cost little
more than the forward (logs and products over every cell at half the bytes and twice the lanes of float64).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from ..analysis.heads import live_keys, query_rows
from ..trace import AttentionTrace
from ..trace.layers import HIDDEN_FILL
from . import native

CELLS = 1 << 22  # [layer, head, query, key] float32 cells of one window on a CPU: 16 MB, passes that stay in cache
#: ... and on a GPU: 256 MB. Each window costs a few kernel launches per layer and statistic, so small windows leave a
#: GPU idle (an 8B model's 512-token text was ~35 windows of 16 MB, the profile ~30x its forward on an H200)
DEVICE_CELLS = 1 << 26
TINY = torch.finfo(torch.float32).tiny
CLARK = ("entropy", "distance", "special", "punctuation", "sink")
OFFSETS = {"previous": -1, "next": 1, "self": 0}
PATTERNS = ("previous_score", "duplicate_score", "induction_score")


@dataclass
class Window:
    """Every layer's whole rows for queries start..stop-1 of one text, read over the keys 0..reach-1 that hold every
    weight of them (the keys after are hidden from every row of the window: weight exactly 0)."""

    weights: torch.Tensor  # [layer, head, w, reach] float32
    start: int
    rows: torch.Tensor  # [layer, w] bool: the queries that count (not padding, may attend something)
    keys: torch.Tensor  # [layer, key] bool: the keys that are not padding (every key of the text)
    norms: torch.Tensor | None  # [layer, head, reach] ||v W_O[h]|| where the trace keeps values

    @property
    def n_keys(self) -> int:
        """The text's keys (the rows' whole length, of which the window reads the first `reach`)."""
        return self.keys.shape[1]


def windows(trace: AttentionTrace, cells: int = CELLS, has_values: bool | None = None, scratch: Scratch | None = None):
    """Windows of queries covering the text, each holding at most `cells` cells (one query at least) over the keys
    that hold their rows' weights (a causal window of queries reads its triangle's keys, not the keys ahead of it).
    scratch: the windows' weights are written into its memory (each window's tensor is overwritten by the next)."""
    n, n_keys, n_layer = trace.n_tokens, trace.n_keys, trace.n_layer
    square = n == n_keys
    masks = layer_masks(trace)
    rows = per_mask(masks, lambda m: np.ones(n, bool) if m is None else query_rows(m, square))
    keys = torch.as_tensor(np.stack(per_mask(masks, lambda m: live_keys(m, n_keys))))
    norms = None
    if trace.has("values") if has_values is None else has_values:
        norms = torch.stack([trace.output_norms(layer, device=True) for layer in range(n_layer)]).float()
    device, scratch = trace.layers[0].tensors()[0].device, scratch or Scratch()
    for start, stop, hi in spans(key_reach(trace, masks), n_layer * trace.n_head, cells):
        weights = scratch.get("weights", (n_layer, trace.n_head, stop - start, hi), torch.float32, device)
        with torch.inference_mode():
            for layer in range(n_layer):  # each layer's weights written in place: no stacked copy
                trace.weights_tensor(
                    layer, queries=(start, stop), keys=None if hi == n_keys else (0, hi), out=weights[layer]
                )
        r = torch.as_tensor(np.stack([x[start:stop] for x in rows]))
        win_norms = None if norms is None else norms[..., :hi]
        yield Window(weights, start, r.to(device), keys.to(device), win_norms)


def layer_masks(trace: AttentionTrace) -> list:
    """`trace.layer_mask` of every layer, each distinct mask made once: the layers that share a mask's structure
    (transformers builds one mask per kind of layer, and the capture keeps one structure for each) share its array."""
    made, out = {}, []
    for y in range(trace.n_layer):
        key = id(trace.facts(y).structure)
        if key not in made:
            made[key] = trace.layer_mask(y)
        out.append(made[key])
    return out


def per_mask(masks: list, fn) -> list:
    """[fn(m) for m in masks], computed once per distinct mask object (`layer_masks` shares them)."""
    done: dict = {}
    for m in masks:
        if id(m) not in done:
            done[id(m)] = fn(m)
    return [done[id(m)] for m in masks]


def window_cells(trace: AttentionTrace) -> int:
    """The cells a window holds where this trace lives (CELLS on a CPU, DEVICE_CELLS on an accelerator)."""
    return cells_on(trace.layers[0].tensors()[0].device)


def cells_on(device) -> int:
    """`window_cells` on `device` (a torch.device or its name): also what bounds a batch of texts' window."""
    return CELLS if torch.device(device).type == "cpu" else DEVICE_CELLS


def key_reach(trace: AttentionTrace, masks: list) -> np.ndarray:
    """int [query]: 1 + the last key any layer lets each query see, so keys from there on hold the fill alone (weight
    exactly 0, `holds_the_rows`); every key for a query that sees none in some layer, and for every query when a
    layer's fill is not that low (the trace would read a window of keys through its row norms) or it has no mask."""
    n, n_keys = trace.n_tokens, trace.n_keys
    fills = [trace.facts(layer).fill for layer in range(trace.n_layer)]
    if any(m is None for m in masks) or not all(f is not None and f <= HIDDEN_FILL for f in fills):
        return np.full(n, n_keys)
    reach = np.zeros(n, np.int64)
    for m in {id(m): m for m in masks}.values():  # each distinct mask once
        last = n_keys - np.argmax(m[:, ::-1], axis=-1)
        reach = np.maximum(reach, np.where(m.any(-1), last, n_keys))
    return reach


def spans(reach: np.ndarray, per_cell: int, cells: int):
    """(start, stop, reach) of windows of queries covering every query: each as many queries as fit `cells` cells
    (per_cell = layers x heads cells per query and key) over the keys its queries reach, one query at least."""
    n, start = len(reach), 0
    while start < n:
        wide = np.maximum.accumulate(reach[start:])  # the keys a window of 1, 2, ... queries reaches
        cost = per_cell * np.arange(1, n - start + 1) * wide
        stop = start + max(1, int(np.searchsorted(cost, cells, side="right")))
        yield start, stop, int(wide[stop - start - 1])
        start = stop


def token_patterns(ids, start: int, stop: int, n_keys: int, device=None) -> dict:
    """bool [w, key] TransformerLens detection patterns of queries start..stop-1 (see attnviz.analysis.heads); ids
    [key], or [text, key] for texts read together (then [text, w, key]); made on `device` (the window's)."""
    ids = torch.as_tensor(np.asarray(ids, np.int64), device=device)
    i = torch.arange(start, stop, device=device)[:, None]
    j = torch.arange(n_keys, device=device)[None, :]
    same = ids[..., start:stop, None] == ids[..., None, :]
    after = torch.zeros_like(same)
    after[..., 1:] = ids[..., start:stop, None] == ids[..., None, :-1]
    previous = (j == i - 1).expand_as(same)
    return {"previous_score": previous, "duplicate_score": same & (j < i), "induction_score": after & (j <= i)}


def row_sums(w: torch.Tensor, f: torch.Tensor, scale=None, scratch=None) -> torch.Tensor:
    """[layer, head, query, feature] float32: each row's sum over keys of w [layer, head, query, key] (times scale
    [layer, head, 1, key] when given: value-weighted rows) x f [layer or 1, query, key, feature] (batched matrix
    products over queries: one pass over the weights for every feature); scratch: where the permuted weights go."""
    n_layer, n_head, n, n_keys = w.shape
    scratch = scratch or Scratch()
    if f.shape[0] not in (1, n_layer):  # texts read together (rows: layer x text), each text's features shared by
        texts = f.shape[0]  # its layers: the rows permuted to [text, query, layer x head, key] (and scaled) at once
        view = lambda x: x.view(-1, texts, n_head, n, n_keys).permute(1, 3, 0, 2, 4)  # noqa: E731
        a = scratch.get("row_sums", (texts, n, n_layer // texts, n_head, n_keys), torch.float32, w.device)
        torch.mul(view(w), view(scale.expand(-1, -1, n, -1)), out=a) if scale is not None else a.copy_(view(w))
        out = torch.bmm(a.view(texts * n, -1, n_keys), f.reshape(texts * n, n_keys, -1))
        return out.view(texts, n, -1, n_head, f.shape[-1]).permute(2, 0, 3, 1, 4).reshape(n_layer, n_head, n, -1)
    if scale is not None:
        w = torch.mul(w, scale, out=scratch.like("u", w))
    if f.shape[0] == 1:  # the same features in every layer (no padding): one product per query for all heads
        a = w.permute(2, 0, 1, 3).reshape(n, n_layer * n_head, n_keys)
        return torch.bmm(a, f[0]).reshape(n, n_layer, n_head, -1).permute(1, 2, 0, 3)
    a = w.permute(0, 2, 1, 3).reshape(n_layer * n, n_head, n_keys)
    return torch.bmm(a, f.reshape(n_layer * n, n_keys, -1)).reshape(n_layer, n, n_head, -1).transpose(1, 2)


def xlogx(w: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    """w log w with 0 log 0 = 0 (a weight below the smallest normal float32 counts as that: under 1e-36 a cell), in
    `out` when given (a Scratch tensor: a fresh [layer, head, query, key] tensor costs more than a pass over it)."""
    return torch.clamp(w, min=TINY, out=out).log_().mul_(w)


def cell_sums(w: torch.Tensor, f: torch.Tensor, norms: torch.Tensor | None, scratch: Scratch) -> dict:
    """Every row sum TextSums takes from a window: w [layer, head, query, key]; f [layer, texts or 1, query, key,
    feature] (`row_sums`' features); norms [layer, head, key] or None. {"sums": [.., query, feature] of w x f,
    "wlogw": of w log w, "top": the largest weight} and with norms {"usums": of u x f, "ulogu": of u log u} for
    u = w x norms (u log u = norms (w log w) + w (norms log norms): no second pass of logarithms). One pass over each
    row in C where it can (attnviz.corpus.native), else PyTorch's passes: the same sums to float32 rounding."""
    out = None
    if native.usable(w, f, norms):
        out = native.window_sums(w, f, norms, None if norms is None else xlogx(norms))
    return pytorch_sums(w, f, norms, scratch) if out is None else out


def pytorch_sums(w: torch.Tensor, f: torch.Tensor, norms: torch.Tensor | None, scratch: Scratch) -> dict:
    """`cell_sums` in PyTorch's passes over the cells (any device, any float type)."""
    wlogw = xlogx(w, scratch.like("xlogx", w))
    out = {"sums": row_sums(w, f, scratch=scratch), "wlogw": wlogw.sum(-1), "top": w.amax(-1)}
    if norms is not None:
        n = norms[:, :, None, :]
        ulogu = torch.mul(wlogw, n, out=wlogw).sum(-1).double()
        ulogu += torch.mul(w, xlogx(n), out=wlogw).sum(-1).double()
        out |= {"ulogu": ulogu, "usums": row_sums(w, f, n, scratch)}  # u = w x norms, multiplied as it is permuted
    return out


class Scratch:
    """Memory reused from window to window and text to text for the large temporaries: a new tensor of a window's
    size is fresh pages from the system each time (zeroed by the kernel on first touch), which cost more than the
    arithmetic done in them. Grows to the largest window seen, which CELLS bounds."""

    def __init__(self):
        self.held: dict = {}

    def get(self, name: str, shape, dtype: torch.dtype, device) -> torch.Tensor:
        n, flat = math.prod(shape), self.held.get(name)
        if flat is None or flat.numel() < n or flat.dtype != dtype or flat.device != torch.device(device):
            flat = self.held[name] = torch.empty(n, dtype=dtype, device=device)
        return flat[:n].view(tuple(shape))

    def like(self, name: str, t: torch.Tensor) -> torch.Tensor:
        return self.get(name, t.shape, t.dtype, t.device)


#: Statistics that are a row's weights times a fixed [query, key] cell feature, summed: one product adds them all.
LINEAR = ("distance", "special", "punctuation", "sink", "previous", "next", "self")


class TextSums:
    """The sums one text's statistics are means of, per layer x head, added window by window.

    Every statistic but entropy is linear in the weights: sum over cells of w[q, k] * F[q, k, f] for a feature F that
    depends only on the positions, the tokens and the padding, so one window's sums are one batched product with F
    (the linear statistics, TransformerLens's pattern cells and the live keys that their scores divide by)."""

    def __init__(self, n_layer, n_head, special, punct, ids, device, has_values=False, scratch=None, square=True):
        """square: queries and keys are the same tokens (self-attention); cross-attention has no pattern scores,
        as the per-text code gives none (they are then undefined: NaN in the profile). Texts read together: special,
        punct and ids are [text, key] and n_layer counts layers x texts (row g of a window is layer g // texts of
        text g % texts; `values` then gives every statistic per such row)."""
        self.has_values, self.ids, self.scratch = has_values, ids, scratch or Scratch()
        zeros = lambda *shape: torch.zeros(shape, dtype=torch.float64, device=device)  # noqa: E731
        self.special = torch.as_tensor(np.asarray(special, bool), device=device)
        self.punct = torch.as_tensor(np.asarray(punct, bool), device=device)
        self.linear, self.entropy = zeros(2, n_layer, n_head, len(LINEAR)), zeros(2, n_layer, n_head)
        self.rows, self.neighbours = zeros(n_layer), zeros(n_layer, len(OFFSETS))
        self.patterns = [name for name in PATTERNS if square and (name == "previous_score" or len(ids))]
        self.hits, self.totals = zeros(n_layer, n_head, len(self.patterns)), zeros(n_layer, n_head)
        self.cells = torch.zeros(n_layer, len(self.patterns), dtype=torch.bool, device=device)

    def features(self, win: Window, n: int, n_keys: int) -> torch.Tensor:
        """[layer or 1, query, key, feature] float32: each linear statistic's cell feature, then each pattern's cells,
        the live keys and every key; zero on rows that do not count (but the last); neighbours, patterns and live keys
        only on live keys. One
        layer stands for all when no query and no key is padding (the features are then the same in every layer)."""
        dev = win.weights.device
        i = torch.arange(win.start, win.start + n, device=dev)[:, None]
        j = torch.arange(n_keys, device=dev)[None, :]
        ids = self.ids if len(self.ids) else np.zeros(n_keys, np.int64)
        found = token_patterns(ids, win.start, win.start + n, n_keys, dev) if self.patterns else {}
        cols = [(i - j).abs(), self.special[None, :], self.punct[None, :], j == 0, j == i - 1, j == i + 1, j == i]
        one = torch.ones(1, 1, dtype=torch.bool, device=dev)
        cols += [found[name] for name in self.patterns] + [one, one]  # live keys; every key (set below)
        rows, keys = win.rows, win.keys
        if self.special.dim() == 2:  # texts read together: each text's features, shared by its layers when they
            texts = self.special.shape[0]  # share its rows and keys (else repeated for every layer)
            cols[1:3] = [self.special[:, None, :], self.punct[:, None, :]]
            f = torch.stack([c.expand(texts, n, n_keys).float() for c in cols], -1)
            alike = lambda x: bool((x.view(-1, texts, x.shape[-1]) == x[None, :texts]).all())  # noqa: E731
            if alike(rows) and alike(keys):
                rows, keys = rows[:texts], keys[:texts]
            else:
                f = f.repeat(rows.shape[0] // texts, 1, 1, 1)
        else:
            f = torch.stack([c.expand(n, n_keys).float() for c in cols], -1)[None]
        if bool(rows.all()) and bool(keys.all()):
            return f
        f = f * rows[:, :, None, None]
        f[..., 4:-1] *= keys[:, None, :, None]
        f[..., -1] = 1.0  # a value-weighted row is normalised over every key, as value_share does
        return f

    def add(self, win: Window) -> torch.Tensor:
        """Add a window's sums; returns each of its rows' largest weight [layer, head, query] float32. Value-weighted
        rows are u = w x ||v W_O|| over their sum Z (Kobayashi et al.): their sums are u's over Z and their entropy
        log Z - (u log u) / Z, so they are never divided out cell by cell."""
        w, rows = win.weights, win.rows
        n, n_keys, n_lin, n_pat = w.shape[2], w.shape[3], len(LINEAR), len(self.patterns)
        f = self.features(win, n, win.n_keys)  # every key: which neighbours and pattern cells a row has
        tile = lambda x: x.repeat(len(self.rows) // x.shape[0], 1)  # noqa: E731 - features of each text, every layer
        self.neighbours += tile(f[..., 4:n_lin].sum((1, 2), dtype=torch.float64))
        self.cells |= tile(f[..., n_lin : n_lin + n_pat].flatten(1, 2).amax(1) > 0)
        if n_keys < win.n_keys:  # the keys the window reads: the rest hold no weight
            f = f[:, :, :n_keys].contiguous()
        rows64 = rows.double()[:, None, :]
        part = cell_sums(w, f, win.norms, self.scratch)
        sums = part["sums"]  # [layer, head, query, feature]
        self.linear[0] += sums[..., :n_lin].sum(2, dtype=torch.float64)
        self.hits += sums[..., n_lin : n_lin + n_pat].sum(2, dtype=torch.float64)
        self.totals += sums[..., -2].sum(2, dtype=torch.float64)
        self.entropy[0] -= (part["wlogw"].double() * rows64).sum(-1)
        if win.norms is not None:
            own, sums = part["ulogu"].double(), part["usums"].double()
            z = sums[..., -1]  # [layer, head, query]; 0 where a row attends nothing: its view is a row of zeros
            live = z > 0
            z = torch.where(live, z, 1.0)
            self.linear[1] += (sums[..., :n_lin] / z[..., None]).sum(2)
            self.entropy[1] += (torch.where(live, z.log() - own / z, 0.0) * rows64).sum(-1)
        self.rows += rows.sum(-1)
        return part["top"]

    def values(self) -> tuple[dict, dict]:
        """(statistic -> [layer, head] float64 numpy of this text, statistic -> [layer, head] bool: defined here).
        Every statistic at once, in a few tensor operations (one copy off the device)."""
        n_layer, n_head = self.totals.shape
        k = 1 + self.has_values
        names = [prefix + name for prefix in ("", "vw_")[:k] for name in ("entropy", *LINEAR)]
        totals = torch.cat([self.entropy[:k, ..., None], self.linear[:k]], -1)  # [k, layer, head, statistic]
        n = torch.cat(
            [self.rows[:, None].expand(-1, 5), self.neighbours], -1
        )  # [layer, statistic]: what they divide by
        out = [(totals / n.clamp(min=1)[:, None, :]).permute(0, 3, 1, 2).flatten(0, 1)]
        defined = [(n > 0).T[:, :, None].expand(-1, n_layer, n_head).repeat(k, 1, 1)]
        if self.patterns:
            ok = self.totals > 0
            out.append(torch.where(ok[..., None], self.hits / torch.where(ok, self.totals, 1.0)[..., None], 0.0))
            out[-1] = out[-1].permute(2, 0, 1)
            defined.append(self.cells.T[:, :, None].expand(-1, n_layer, n_head))
            names += self.patterns
        else:
            out.append(torch.zeros(len(PATTERNS), n_layer, n_head, dtype=torch.float64, device=self.totals.device))
            defined.append(torch.zeros(out[-1].shape, dtype=torch.bool, device=self.totals.device))
            names += PATTERNS
        values = torch.cat(out).to(torch.float64).cpu().numpy()
        ok = torch.cat(defined).cpu().numpy()
        return dict(zip(names, values)), dict(zip(names, ok))
