"""Mask experiments: which cells a mask forbids, what leaks without it, where the weight goes, fully masked rows.

Everything softmax-shaped goes through `attnviz.attention.stages_from_scores`, so what the Masks page shows
is what the model computes, not a second implementation that could drift from it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ..attention import DEFAULT_FILL, stages_from_scores
from ..trace import AttentionTrace
from ..trace.window_cache import remembered
from .heads import head_groups

#: Fill values people meet in the wild, by name: Hugging Face models use the float32 minimum, many
#: tutorials -10000 or -1e9, some code -inf.
PART_NAMES = {"encoder": "encoder self-attention", "decoder": "decoder self-attention", "cross": "cross-attention"}
PART_REACH = {
    "encoder": "The decoder's cross-attention reads the changed encoder output, so the model's output changes too.",
    "decoder": "Cross-attention layers from there on read the changed decoder states, and so does the output.",
    "cross": "Later decoder layers read the changed cross-attention output; the encoder is untouched.",
}
COMMON_FILLS = {"float32 min": DEFAULT_FILL, "-10000": -10000.0, "-1e9": -1e9, "-inf": float("-inf")}


def mask_options(
    *, single_layer: bool, pad_to: int, pad_mask: bool, causal: bool, hide, layers, fill: float, part: str | None = None
) -> dict:
    """The trace options for a mask experiment; our single-layer module has no padding and no layer choice.

    part: an encoder-decoder's attention the experiment changes (its hidden positions are that part's keys); the
    model reads one source text there, so there is no padding."""
    opts = dict(causal=bool(causal), hide=tuple(sorted(int(i) for i in hide)), fill=float(fill))
    if not single_layer:
        opts.update(pad_to=int(pad_to) if pad_to else None, pad_mask=bool(pad_mask), layers=layers)
    if part is not None:
        opts.update(part=part, pad_to=None, pad_mask=True)
    return opts


def unmasked_options(opts: dict) -> dict:
    """The same experiment with every mask under study switched off: same tokens, same layers, nothing hidden."""
    out = dict(opts, causal=False, hide=(), fill=None)
    if "pad_mask" in out:
        out["pad_mask"] = False
    return out


def model_options(opts: dict) -> dict:
    """The model's own trace of the same tokens: no experiment at all, so every layer has the model's own mask
    (its causal and padding masks, its fill). "Largest change" measures an experiment against this."""
    out = dict(opts, causal=False, hide=(), fill=None)
    if "pad_mask" in out:
        out.update(pad_mask=True, layers=None)
    return out


NOTHING_MASKED = (
    "Nothing is masked with these settings: chart 1 has no grey cell and both sides of chart 2 are the same. Turn on "
    "the causal mask, hide a token, or pad with the padding mask on (off: chart 3 shows the leak)."
)
ALL_HIDDEN = (
    "Hiding every token leaves no query a key to attend: every row would be fully masked, and the page would show "
    "only the fill value at work. Keep at least one token visible (chart 4 below shows a fully masked row for "
    "any choice)."
)


def hides_everything(hide, n_keys: int) -> bool:
    """True when `hide` names every key position (the multiselect's "Select all"): the page refuses it."""
    return n_keys > 0 and len({int(i) for i in hide if 0 <= int(i) < n_keys}) >= n_keys


def own_mask_words(own: AttentionTrace, layer: int) -> str:
    """What the model's own mask hides at `layer`, in words: what a layer outside the experiment keeps."""
    mask = own.layer_mask(layer)
    if mask is None or np.asarray(mask).all():
        return "none, every key visible"
    parts = ["its causal mask"] if own_causal(own, layer) else []
    if not np.asarray(mask).any(axis=0).all():
        parts.append("its padding mask")
    return " and ".join(parts) or "its own mask"


def reach_note(
    layers: tuple[int, ...] | None,
    layer: int,
    n_layer: int,
    single_layer: bool = False,
    part: str | None = None,
    kept: str | None = None,
    changed: bool = True,
) -> str:
    """Say which layers a forward-pass mask experiment changed, so nobody mistakes it for a one-layer what-if.

    part: an encoder-decoder's attention under the experiment (its layers are counted within it). kept: the
    model's own mask in words (`own_mask_words`), what every layer outside `layers` keeps. changed: False when the
    experiment's weights equal the model's own in every layer (nothing to reach)."""
    if not changed and not single_layer:
        own = f" (the model's own mask: {kept})" if kept else ""
        return f"**No experiment in force.** With these settings every layer computes what the model computes{own}."
    if single_layer:
        return "**Forward-pass experiment.** Our single-layer module ran again with the mask."
    if part is not None:
        return reach_note(layers, layer, n_layer, kept=kept).replace("layer", f"{PART_NAMES[part]} layer", 1) + (
            " " + PART_REACH[part]
        )
    if layers is None:
        return "**Forward-pass experiment.** The model ran again with the mask inside every layer."
    later = (
        (f", and layer {layer + 1}" if layer + 1 == n_layer - 1 else f", and layers {layer + 1}..{n_layer - 1}")
        + " changed too because their input changed"
        if layer < n_layer - 1
        else ""
    )
    own = f" Every other layer keeps the model's own mask ({kept})." if kept and n_layer > 1 else ""
    return f"**Forward-pass experiment.** The model ran again with the mask inside layer {layer} only{later}.{own}"


def own_causal(trace: AttentionTrace, layer: int) -> bool:
    """True when the model's own mask (no experiment) already hides every future key at `layer` (GPT-2 and kin)."""
    mask = trace.layer_mask(layer)
    if mask is None or min(mask.shape) < 2:
        return False
    return not np.triu(mask, k=1).any()


def forbidden_cells(n_tokens: int, n_real: int, causal: bool = False, hide=(), n_keys=None, n_real_keys=None):
    """[query, key] True where a query should see nothing: padding keys, future keys (causal), hidden keys.

    n_keys / n_real_keys: cross-attention's keys (another text) and how many of them are not padding; by default
    the keys are the queries. With more keys than queries, causal aligns the last query with the last key."""
    n_keys = n_tokens if n_keys is None else n_keys
    n_real_keys = n_real if n_real_keys is None else n_real_keys
    keys, queries = np.arange(n_keys), np.arange(n_tokens)
    out = np.broadcast_to(keys >= n_real_keys, (n_tokens, n_keys)).copy()
    if causal:
        out |= keys[None, :] > queries[:, None] + (n_keys - n_tokens)
    hide = [int(i) for i in hide if 0 <= int(i) < n_keys]
    out[:, hide] = True
    return out


def leaked(weights: np.ndarray, forbidden: np.ndarray, n_real: int) -> float:
    """Attention mass on forbidden keys in one layer's weights [head, query, key], averaged over heads and real
    (non-padding) queries.

    0 means the mask held; 0.3 means 30% of an average query's attention went where it should not.
    Padding queries are left out: their outputs are thrown away anyway.
    """
    w = np.asarray(weights, dtype=np.float64)[:, :n_real]  # [H, q_real, K]
    return float((w * forbidden[None, :n_real]).sum(axis=-1).mean())


def layer_change(a: np.ndarray, b: np.ndarray) -> float:
    """Largest |a - b| over one layer's heads, queries and keys: did a forward-pass experiment reach it?"""
    return float(np.abs(np.asarray(a, np.float64) - np.asarray(b, np.float64)).max())


@dataclass(frozen=True)
class FillRow:
    """What softmax gives with one fill value on a row with every key masked and on a row with some keys masked."""

    fill: str
    every_masked: np.ndarray  # [key]
    some_masked: np.ndarray  # [key]


def fill_demo(scaled_row: np.ndarray, visible: np.ndarray, fills: dict = COMMON_FILLS) -> list[FillRow]:
    """Run the package's own stage math on one real row of scaled values, for each fill.

    Every key masked: a finite fill makes every entry equal, so softmax is uniform (1 / n_keys);
    -inf makes every entry -inf and attnviz's softmax returns zeros (torch's would return NaN).
    Some keys masked (`visible` False somewhere): every fill gives the same weights, since
    exp(fill - max) underflows to exactly 0 in float32 for all of them.
    """
    row = torch.from_numpy(np.array(scaled_row, np.float32))
    masks = torch.stack([torch.zeros_like(row, dtype=torch.bool), torch.from_numpy(np.array(visible, bool))])
    out = []
    for name, value in fills.items():
        w = stages_from_scores(row.expand(2, -1), 1.0, masks, value).weights.numpy()  # [2, key]
        out.append(FillRow(name, w[0], w[1]))
    return out


def demo_row(mask: np.ndarray, n_real: int) -> tuple[int, np.ndarray]:
    """(query, visible keys) for the fill demo: the experiment's own partially masked row that keeps the most keys
    visible (the most interesting softmax); without one, query 0 with only the first half of the keys visible."""
    mask = np.asarray(mask, bool)[:n_real]
    visible = mask.sum(axis=-1)
    partial = np.flatnonzero((visible > 0) & (visible < mask.shape[-1]))
    if partial.size:
        q = int(partial[np.argmax(visible[partial])])
        return q, mask[q]
    return 0, np.arange(mask.shape[-1]) < max(1, (mask.shape[-1] + 1) // 2)


@dataclass(frozen=True)
class DeadRow:
    """A real query with no visible key in the shown layer, and where the model's softmax still sends its weight."""

    query: int
    total: float  # the row's weight: 1 with a finite fill (a uniform row), 0 with -inf (it attends to nothing)
    future: float  # of it, the weight on future keys, which a causal mask (the model's or yours) should hide


@dataclass(frozen=True)
class MaskReport:
    """Everything the Masks page shows for one layer and head: the experiment (E), every key visible (W) and the
    model's own trace (M)."""

    layer: int
    head: int
    n_real: int
    forbidden: np.ndarray  # [query, key] in the shown layer: the experiment's cells and the model's own
    leak_with: np.ndarray  # [layer] E's weight on cells that should be invisible
    leak_without: np.ndarray  # [layer] W's weight there
    change: np.ndarray  # [layer] max |E - M|: what the experiment changed against the model as it is
    dead_rows: tuple[DeadRow, ...]  # real queries with every key masked in this layer (the shown head)
    fills: list[FillRow]
    demo_query: int

    @property
    def masks_anything(self) -> bool:
        """Whether any real query has a cell it should not see (the experiment's or the model's own)."""
        return bool(self.forbidden[: self.n_real].any())


def with_own_mask(forbidden: np.ndarray, own_mask) -> np.ndarray:
    """The forbidden cells plus those the model's own mask hides (its causal mask, a sliding window, padding)."""
    return forbidden if own_mask is None else forbidden | ~np.asarray(own_mask, bool)


def dead_rows(weights: np.ndarray, mask: np.ndarray, n_real: int, future: np.ndarray) -> tuple[DeadRow, ...]:
    """DeadRow for every real query whose row of `mask` [query, key] is all False; weights [query, key] of one
    head; future bool [query, key]: the cells a causal mask hides (all False without one)."""
    w = np.asarray(weights, np.float64)
    rows = [r for r in range(n_real) if not mask[r].any()]
    return tuple(DeadRow(r, float(w[r].sum()), float(w[r, future[r]].sum())) for r in rows)


REPORT_CELLS = 1 << 17  # [head, query, key] cells of one block of query rows measured at once (1 MB of float64)


def _layer_measures(
    with_mask: AttentionTrace, without: AttentionTrace, own: AttentionTrace, layer: int, forbidden, n_real: int
) -> tuple[float, float, float]:
    """(leak with the mask, leak without it, max change against the model's own weights) of one layer: `leaked` and
    `layer_change` on each block of query rows, the three traces' weights read a head group at a time (`head_groups`:
    a short text's whole layer at once, a long text's one head, never a layer of them), so the float64 arithmetic
    stays in the cache. Few large reads, not one per block or per head: many small torch calls are slow on a busy
    host."""
    n_head, n_keys = with_mask.n_head, with_mask.n_keys
    leak = np.zeros(2)
    change = 0.0
    for heads in head_groups(n_head, with_mask.n_tokens * n_keys):  # a short text: the whole layer in one read
        w, wo, m = (t.stages(layer, heads=heads).weights for t in (with_mask, without, own))  # [head, query, key]
        step = max(1, REPORT_CELLS // (len(heads) * n_keys))
        for a in range(0, with_mask.n_tokens, step):
            b = min(a + step, with_mask.n_tokens)
            real = max(0, min(b, n_real) - a)  # the block's real (non-padding) queries
            if real:  # `leaked` is a mean over the block's heads and real queries: its sum is that times their count
                leak += [leaked(x[:, a : a + real], forbidden[a : a + real], real) * len(heads) * real for x in (w, wo)]
            change = max(change, layer_change(w[:, a:b], m[:, a:b]))
    per_row = leak / (n_head * n_real) if n_real > 0 else np.full(2, np.nan)  # the mean over heads and real queries
    return float(per_row[0]), float(per_row[1]), change


@remembered
def mask_report(
    with_mask: AttentionTrace,
    without: AttentionTrace,
    own: AttentionTrace,
    layer: int,
    head: int,
    n_real: int,
    causal: bool,
    hide,
    n_real_keys: int | None = None,
) -> MaskReport:
    """Compare the experiment's trace with the same tokens traced with no mask under study (`without`, for the
    leaks) and with the model as it is (`own`, for the change), one layer at a time.

    Cells that should be invisible are the experiment's (`forbidden_cells`) and those the model's own mask hides in
    that layer: hiding a causal model's only visible key sends a finite fill's weight to the future, and the leak
    counts it. n_real_keys: keys that are not padding, when they are not the queries (cross-attention)."""
    base = forbidden_cells(with_mask.n_tokens, n_real, causal, hide, with_mask.n_keys, n_real_keys)
    layers = [
        _layer_measures(with_mask, without, own, i, with_own_mask(base, own.layer_mask(i)), n_real)
        for i in range(with_mask.n_layer)
    ]
    leak_with, leak_without, change = (np.array(m) for m in zip(*layers))
    mask = with_mask.layer_mask(layer)
    n, k = with_mask.n_tokens, with_mask.n_keys
    future = forbidden_cells(n, n, True, (), k, k) & (causal or own_causal(own, layer))  # the cells causal hides
    q, visible = demo_row(mask, n_real)
    dead = not mask[:n_real].any(axis=-1).all()  # a real query with no visible key: read its head's weights
    return MaskReport(
        layer=layer,
        head=head,
        n_real=n_real,
        forbidden=with_own_mask(base, own.layer_mask(layer)),
        leak_with=leak_with,
        leak_without=leak_without,
        change=change,
        dead_rows=dead_rows(with_mask.stages(layer, heads=head).weights[0], mask, n_real, future) if dead else (),
        fills=fill_demo(with_mask.stages(layer, heads=head, queries=(q, q + 1)).scaled[0, 0], visible),
        demo_query=q,
    )
