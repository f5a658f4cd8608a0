"""Several texts through one traced forward: right-padded, every layer's q, k, mask and value norms kept for the whole
batch, and one window [layer, text, head, query, key] of every text's whole rows read from them.

Why right padding whatever the tokenizer's side: a real token then keeps its position (0, 1, ...) and sees exactly the
keys it sees alone (the padding mask hides the pads after it; a causal mask hides them anyway), so its q, k and rows
are the ones of its own trace, up to the rounding of products of another shape. The window's weights are computed as
a trace computes a recorded layer's (q.k in float32, the layer's scale, mask and fill, a softmax: `masked_scores`,
`rows_softmax`, the same numbers to float32 rounding), over each text's whole rows; padding is no row and no key of any
text (`rows`, `keys`), and a pad key weighs exactly 0 in a real row (the fill).

Only the plain case is batched: a model traced through the seam whose every attention call is a scaled dot product
with a mask (no position bias, softcap or sinks) and whose texts all keep their values or all leave them out; anything
else is read one text a forward (`capture` returns None), as it was before batching.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ..analysis.heads import is_punctuation, special_positions
from ..attention import masked_in_place, softmax
from ..hf import capacity, passes
from ..hf.encode import Encoded
from ..hf.probe import model_inputs
from ..hf.recorder import CaptureRefused, Recorder, until_last
from ..trace import output_norms
from ..trace.layers import HIDDEN_FILL
from .examples import RowKeys
from .qk_sample import Drawn, eligible_of, text_priorities, token_entry
from .reducers import sampled_rows_of
from .rows import TextSums, Window

#: A batch holds at most this many padded tokens per token of its texts: texts are sorted by length, so this cuts a
#: batch only where the lengths jump (a short text padded to a long one's length would cost the long one's forward).
PADDING = 1.5
#: The statistics read a batch in runs of texts whose window holds at most this many cells per cell of their own: the
#: forward's cost grows with the padded tokens, the statistics' with the padded cells (the square of the length).
CELL_WASTE = 1.6


@dataclass
class Batched:
    """What one forward of a few texts recorded, every layer stacked: q [layer, text, head, T, d], k [layer, text,
    kv_head, T, d], each layer's scale and fill, allowed [layer, text, T, T] bool and value norms [layer, text, head,
    T] (None without values); `lengths` [text]: each text's tokens (the rest of T is padding)."""

    encoded: list
    lengths: np.ndarray
    q: torch.Tensor
    k: torch.Tensor
    scale: list
    fill: list
    allowed: torch.Tensor
    norms: torch.Tensor | None

    def subset(self, texts: list) -> Batched:
        """The texts at positions `texts` alone, padded only to the longest of them (itself when that is all)."""
        if list(texts) == list(range(len(self.encoded))):
            return self
        n = int(self.lengths[texts].max())
        at = torch.as_tensor(texts, device=self.q.device)
        cut = lambda x, *keep: None if x is None else x[:, at][(slice(None), slice(None), *keep)]  # noqa: E731
        return Batched(
            [self.encoded[i] for i in texts],
            self.lengths[texts],
            cut(self.q, slice(None), slice(0, n)),
            cut(self.k, slice(None), slice(0, n)),
            self.scale,
            self.fill,
            cut(self.allowed, slice(0, n), slice(0, n)),
            cut(self.norms, slice(None), slice(0, n)),
        )


def chunks(lengths: np.ndarray, waste: float = CELL_WASTE) -> list[list[int]]:
    """Positions into `lengths`, sorted by length, in runs whose window (texts x the longest's square) holds at most
    `waste` times their own cells; each run in position order."""
    out, run, own = [], [], 0
    for i in np.argsort(lengths, kind="stable"):
        n = int(lengths[i])
        if run and (len(run) + 1) * n * n > waste * (own + n * n):
            out.append(sorted(run))
            run, own = [], 0
        run.append(int(i))
        own += n * n
    return out + [sorted(run)] if run else out


class BatchRecorder(Recorder):
    """A Recorder that keeps every text of the batch (a trace's keeps batch item 0): the seam runs the model's own
    SDPA kernel with the model's own mask (no mask structure is recognised, so no fused kernel that would assume one),
    and any attention the window cannot compute alike (a bias, softcap or sinks) marks the batch as not plain."""

    def __init__(self, **kw):
        super().__init__(**kw)
        self.plain, self.allowed, self.kept = True, None, {n: [] for n in ("q", "k", "scale", "fill", "mask", "norms")}

    def structure(self, allowed, query, key):
        self.allowed = allowed
        return None

    def keep(self, module, query, key, scale, allowed, fill, extra, scale_on="scores", norms=None, value=None, *_):
        if any(extra[x] is not None for x in ("bias", "softcap", "sinks")):
            self.plain = False
        shape, kept = (query.shape[0], query.shape[-2], key.shape[-2]), self.kept
        kept["mask"].append(None if self.allowed is None else self.allowed.expand(shape[0], 1, *shape[1:])[:, 0])
        kept["q"].append(query), kept["k"].append(key), kept["scale"].append(float(scale))
        kept["fill"].append(float(fill))
        proj = self.outputs.get(module)
        if value is None or proj is None or self.values_left_out is not None:
            kept["norms"].append(None)
        else:  # output_norms.table per text: texts and keys side by side as one row of keys per key/value head
            n_head, v = query.shape[1], value.transpose(0, 1).flatten(1, 2)
            written = output_norms.table(v, proj.r_factors(n_head, value.device))
            kept["norms"].append(written.unflatten(1, (shape[0], -1)).transpose(0, 1))
        self.layers.append(len(self.layers))
        self.modules.append(module)
        self.done(module)

    def batched(self, encoded: list, lengths: np.ndarray) -> Batched | None:
        """The layers stacked; None where they cannot be (a layer unlike the others, or no mask where pads are)."""
        kept = self.kept
        shapes = {(tuple(q.shape), tuple(k.shape)) for q, k in zip(kept["q"], kept["k"])}
        unmasked = any(m is None for m in kept["mask"]) and lengths.min() < lengths.max()  # a pad would be seen
        if not self.plain or unmasked or len(shapes) != 1 or len({n is None for n in kept["norms"]}) != 1:
            return None
        q = kept["q"][0]
        every = torch.ones(q.shape[0], q.shape[2], q.shape[2], dtype=torch.bool, device=q.device)
        masks = torch.stack([every if m is None else m for m in kept["mask"]])
        norms = None if kept["norms"][0] is None else torch.stack(kept["norms"])
        stack = torch.stack
        return Batched(encoded, lengths, stack(kept["q"]), stack(kept["k"]), kept["scale"], kept["fill"], masks, norms)


def capture(loaded, encoded: list[Encoded]) -> Batched | None:
    """The batch's forward, right-padded; None where it cannot be read as one window (see the module's docstring)."""
    lengths = np.array([len(e.ids) for e in encoded])
    left_out = {capacity.values_left_out(loaded, int(n)) for n in lengths}
    if loaded.route != "seam" or len(left_out) > 1:
        return None
    inputs = padded(loaded.tokenizer, encoded, int(lengths.max()))
    rec = BatchRecorder(pad_keys=None, outputs=loaded.outputs, values_left_out=left_out.pop(), **until_last(loaded))
    try:
        passes.forward(loaded.model, model_inputs(loaded, inputs), rec)  # ends after the last attention call
    except CaptureRefused:
        return None
    return rec.batched(encoded, lengths) if len(rec.layers) == loaded.n_layer else None


def padded(tokenizer, encoded: list[Encoded], width: int) -> dict:
    """The texts' tensors side by side, each padded on the right to `width` tokens (attention_mask 0 there)."""
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else (tokenizer.eos_token_id or 0)
    ids = torch.full((len(encoded), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(encoded), width), dtype=torch.long)
    types = torch.zeros((len(encoded), width), dtype=torch.long)
    for b, e in enumerate(encoded):
        n = len(e.ids)
        ids[b, :n], mask[b, :n] = e.inputs["input_ids"][0], 1
        if "token_type_ids" in e.inputs:
            types[b, :n] = e.inputs["token_type_ids"][0]
    out = {"input_ids": ids, "attention_mask": mask}
    if "token_type_ids" in encoded[0].inputs:
        out["token_type_ids"] = types
    return out


@dataclass
class BatchWindow:
    """Every text's whole rows: weights [layer, text, head, T, T] float32; rows [layer, text, T] bool (the queries
    that count: not padding, may attend something); keys [layer, text, T] bool (not padding); norms [layer, text,
    head, T] or None."""

    weights: torch.Tensor
    rows: torch.Tensor
    keys: torch.Tensor
    norms: torch.Tensor | None


def window(batched: Batched, scratch) -> BatchWindow:
    """The batch's window, its weights written into `scratch` memory (attnviz.corpus.rows.Scratch): every layer's
    scores in one product where the layers share their scale and fill (else a layer at a time)."""
    (n_layer, n_text, n_head, width, _), n_kv = batched.q.shape, batched.k.shape[2]
    weights = scratch.get("batch", (n_layer, n_text, n_head, width, width), torch.float32, batched.q.device)
    real = torch.as_tensor(np.arange(width)[None, :] < batched.lengths[:, None], device=batched.q.device)
    allowed = batched.allowed & real[:, :, None] & real[:, None, :]  # [layer, text, T, T]: a text's own cells
    layers = (
        [slice(None)] if len({*zip(batched.scale, batched.fill)}) == 1 else [slice(y, y + 1) for y in range(n_layer)]
    )
    with torch.inference_mode():
        for at in layers:
            q, k = batched.q[at].float(), batched.k[at].float()  # a group of query heads shares its key head's product
            shape = (q.shape[0], n_text, n_head, width, width)
            scores = scratch.get("batch_scores", shape, torch.float32, q.device)
            torch.matmul(q.unflatten(2, (n_kv, -1)).flatten(3, 4), k.mT, out=scores.view(*shape[:2], n_kv, -1, width))
            y = range(n_layer)[at][0]
            masked = masked_scores(scores, batched.scale[y], allowed[at, :, None], batched.fill[y])
            rows_softmax(masked, weights[at])
    seen = allowed.any(-2)  # [layer, text, T]: keys some query of the text may attend
    norms = None if batched.norms is None else batched.norms.float()
    return BatchWindow(weights, allowed.any(-1) & seen, seen, norms)


def masked_scores(scores: torch.Tensor, scale: float, allowed: torch.Tensor, fill: float) -> torch.Tensor:
    """`attention.masked_in_place(scores, scale, allowed, fill)`, the same numbers: with a fill at or below -1e30 a
    hidden cell's score is lost in the fill's rounding (|score| is far below half its spacing, ~1e22), so adding the
    fill there is masking it, and a float addition broadcast over the heads costs a quarter of a masked_fill."""
    if fill > HIDDEN_FILL:
        return masked_in_place(scores, scale, allowed, fill)
    return scores.mul_(scale).add_(torch.where(allowed, 0.0, fill))


#: Rows shorter than this many keys: torch's CPU softmax takes a path there that costs ~18 ns a cell against ~2 at 16
#: keys and more (torch 2.13, AVX-512), and short texts read together are mostly such rows.
SHORT_ROWS = 16


def rows_softmax(x: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    """`attention.softmax(x, out)`; rows of fewer than SHORT_ROWS keys by its definition instead (max, exp of the
    difference, sum, divide: ~4 ns a cell), equal to torch's kernel up to float32 rounding, an all -inf row all zeros
    as there (a query that may attend nothing)."""
    if x.shape[-1] >= SHORT_ROWS:
        return softmax(x, out)
    top = x.amax(-1, keepdim=True)
    torch.sub(x, top, out=out).exp_()
    out.div_(out.sum(-1, keepdim=True))
    dead = torch.isneginf(top)
    return out.masked_fill_(dead, 0.0) if bool(dead.any()) else out


def fits(texts: int, n: int, per_cell: int, cells: int) -> bool:
    """Whether `texts` texts padded to n tokens make a window of at most `cells` cells (per_cell: layers x heads)."""
    return texts * n * n * per_cell <= cells


def plan(lengths: np.ndarray, ids: list, most: int, tokens: int, cells: int, per_cell: int) -> list[list[int]]:
    """Batches of positions into `lengths` (and `ids`): texts of similar length together (sorted by length, then
    id), each batch at most `most` texts, `tokens` padded tokens, `cells` cells of its window (per_cell = layers x
    heads per query and key) and PADDING times its texts' own tokens; a text too long for a window of its own is a
    batch of one. Within a batch, texts are in id order (the examples' ties then fall as in one text after another)."""
    order = sorted(range(len(lengths)), key=lambda i: (int(lengths[i]), ids[i]))
    out, group, real = [], [], 0
    for i in order:
        n = int(lengths[i])
        wider = len(group) + 1
        if group and (
            wider > most or wider * n > min(tokens, PADDING * (real + n)) or not fits(wider, n, per_cell, cells)
        ):
            out.append(group)
            group, real = [], 0
        group.append(i)
        real += n
    if group:
        out.append(group)
    return [sorted(g, key=lambda i: ids[i]) for g in out]


def drawn(batched: Batched, texts: dict, seed: int, per_text: int, dtype: str) -> dict:
    """{text id: Drawn} of the batch's texts `texts` ({text id: its place in the batch}) for the query-key sample, as
    `qk_sample.draw` takes them from a text's own trace and `Drawn.stored(dtype)` keeps them (float32 for a text with a
    value past float16's range, looked for text by text only in a batch that has one): a text's tokens taken by one
    index_select per tensor, in the layout Drawn keeps ([layer, head, token, d]), its own arrays (a view would hold
    the whole batch's). A plain batch has no position bias, softcap or sinks: no layer notes."""
    pos = dict(zip(texts, eligible_of(seed, list(texts), batched.lengths[list(texts.values())], per_text)))
    most, kept, dev = float(np.finfo(np.float16).max), getattr(torch, dtype), batched.q.device
    far = max(float(x.abs().max()) for x in torch.aminmax(batched.q) + torch.aminmax(batched.k)) > most
    allowed, out = batched.allowed.cpu().numpy(), {}
    for t, p in pos.items():
        b, at = texts[t], torch.as_tensor(p, device=dev)
        q, k = (x[:, b].index_select(2, at).float() for x in (batched.q, batched.k))  # [layer, head, token, d]
        big = far and max(float(x.abs().max()) for x in (q, k)) > most
        q, k = (x.cpu().numpy() if big else x.to(kept).cpu().numpy() for x in (q, k))  # torch rounds as numpy
        tokens = batched.encoded[b].tokens
        out[t] = Drawn(list(q), list(k), list(allowed[:, b][:, p[:, None], p]),
                       [token_entry(tokens, t, int(x)) for x in p], list(batched.scale), [[] for _ in batched.scale])  # fmt: skip
    return out


def observe(state, batched: Batched, text_ids: list, specials, cells: int) -> None:
    """Add texts read together to a ProfileState (attnviz.corpus.state): every reducer takes a window [layer, text,
    head, query, key] of a run of them at once (`chunks`: texts of similar length), and each text's statistics are its
    own (its rows, its keys; padding is neither), added to the means text after text in the order given; `specials`:
    special_tokens_of the tokenizer."""
    for run in chunks(batched.lengths):
        observe_run(state, batched.subset(run), [text_ids[i] for i in run], specials, cells)


def padded_rows(rows: list, width: int, dtype) -> np.ndarray:
    """[len(rows), width] of rows of at most `width` values, zero (False) after each."""
    out = np.zeros((len(rows), width), dtype)
    for b, r in enumerate(rows):
        out[b, : len(r)] = r
    return out


def observe_run(state, batched: Batched, text_ids: list, specials, cells: int) -> None:
    """`observe` of texts whose one window is read at once."""
    s, win = state.settings, window(batched, state.scratch)
    n_layer, n_text, n_head, width = win.weights.shape[:4]
    lengths, enc = batched.lengths, batched.encoded
    pad = lambda rows, dtype=bool: padded_rows(rows, width, dtype)  # noqa: E731
    special = pad([special_positions(e.ids, e.tokens, *specials) for e in enc])
    punct = pad([[is_punctuation(t) for t in e.tokens] for e in enc])
    dev, flat = win.weights.device, lambda t: t.flatten(0, 1)  # noqa: E731 - [layer x text, ...]
    sums = TextSums(n_layer * n_text, n_head, special, punct, pad([e.ids for e in enc], np.int64), dev, win.norms is not None,
                    state.scratch)  # fmt: skip
    norms = None if win.norms is None else flat(win.norms)
    top = sums.add(Window(flat(win.weights), 0, flat(win.rows), flat(win.keys), norms))  # [layer x text, head, T]
    values, defined = sums.values()
    names = tuple(values)
    per_text = lambda d: np.stack([d[n] for n in names]).reshape(-1, n_layer, n_text, n_head).transpose(0, 2, 1, 3)  # noqa: E731
    state.means.update_texts(names, per_text(values), per_text(defined))
    rows = win.rows.cpu().numpy()
    maxw = top.view(n_layer, n_text, n_head, width).transpose(1, 2).reshape(n_layer, n_head, -1).double().cpu().numpy()
    state.histogram.update(maxw, rows.reshape(n_layer, -1))
    keys = RowKeys(win.weights.reshape(-1, width), s.example_keys,
                   lambda y, h, c: ((y * n_text + c // width) * n_head + h) * width + c % width,
                   np.repeat(lengths, width))  # fmt: skip
    columns = (np.repeat(np.asarray(text_ids, np.int64), width), np.tile(np.arange(width), n_text))
    state.examples.update_columns(keys, rows.reshape(n_layer, -1), columns, maxw)
    if s.distances:
        sample = pad(sampled_rows_of(s.seed, text_ids, lengths, s.distance_rows))
        at = torch.nonzero(win.rows.all(0) & torch.as_tensor(sample, device=dev), as_tuple=True)
        state.divergence.add(win.weights[:, at[0], :, at[1]].permute(1, 2, 0, 3).flatten(0, 1), cells)
    n_rows = sums.rows.reshape(n_layer, n_text).amax(0).cpu().numpy()
    for b, (t, prio) in enumerate(zip(text_ids, text_priorities(s.seed, text_ids))):
        state.qk.update(t, int(lengths[b]), prio=float(prio))
    wanted = state.qk.wanted(text_ids)
    if wanted:
        place = {t: b for b, t in enumerate(text_ids)}
        for t, d in drawn(batched, {t: place[t] for t in wanted}, s.seed, s.qk_per_text, s.qk_dtype).items():
            state.qk.hold(t, d)
    for b in range(n_text):
        state.counts["texts"] += 1
        state.counts["tokens"] += int(lengths[b])
        state.counts["rows"] += int(n_rows[b])
        state.counts["cut"] += int(enc[b].n_dropped > 0)
        state.counts["dropped_tokens"] += int(enc[b].n_dropped)
