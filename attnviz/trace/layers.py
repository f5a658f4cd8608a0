"""The two kinds of layer behind an AttentionTrace: a recorded layer and given weights.

A recorded layer (`LayerRecord`) keeps what its stages are made from: q and k as the model used them, the scale, the
boolean mask, the fill and whatever the model adds (a bias, logit softcapping, attention sinks); its stages are computed
when asked. Given weights (`GivenWeights`) are the final softmax weights and nothing else: a family whose attention code
attnviz cannot read, or weights handed over as arrays. Both answer the same questions (the stages of a window, one key's
column, what they cannot give and why) in float32 torch tensors where the layer lives; AttentionTrace turns the
answers into read-only numpy arrays, so no caller ever asks which kind it holds.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Literal, get_args

import numpy as np
import torch

from ..attention import (
    Stage,
    Stages,
    expand_kv,
    masked_from_scores,
    stages_from_scores,
    weights_from_scores,
)
from ..errors import AttnvizError
from . import row_norms
from .mask import StructuredMask, as_structured
from .row_norms import RowNorms

STAGES: tuple[Stage, ...] = get_args(Stage)
#: What a trace may be asked for with `has`: the four stages, the query and key vectors (the neuron view) and the
#: values with the size of what each head writes from each key (attnviz.analysis.values).
Capability = Literal[Stage, "vectors", "values"]
CAPABILITIES: tuple[Capability, ...] = get_args(Capability)
#: Where a model applied its scale: to the scores (q.k * scale), to q before q.k (OPT, ESM, XGLM, XLM), to k
#: (DeBERTa-v2) or to both (Nystromformer: each by the scale's square root).
ScaleOn = Literal["scores", "q", "k", "q and k"]
NO_VALUES = "it keeps no value vectors"
NORM_CELLS = 2**22  # score cells per step while computing the row norms (16 MB of float32 per intermediate)
BLOCK = 2**22  # elements of q or k made float32 at once for a product (16 MB: few ops, no copy of a whole text)
ALL = slice(None)
#: A fill at or below this hides a key exactly: exp(fill - score) is 0 in float32 for any score above fill + 104.
HIDDEN_FILL = -1e30


def kv_groups(n_head: int, n_kv: int) -> tuple[tuple[int, ...], ...]:
    """Query heads that share each key/value head, in transformers' repeat_kv layout: head h uses kv head
    h // (n_head / n_kv)."""
    per = n_head // n_kv
    return tuple(tuple(range(g * per, (g + 1) * per)) for g in range(n_kv))


def _every(heads, n_head: int) -> torch.Tensor:
    return torch.arange(n_head) if heads is None else heads


def _numpy(t: torch.Tensor | None) -> np.ndarray | None:
    return None if t is None else t.detach().float().cpu().numpy()


def grouped_products(q: torch.Tensor, k: torch.Tensor, heads: torch.Tensor) -> torch.Tensor:
    """q.k^T in float32 for query heads `heads` of q [head, query, d] against k [kv head, key, d], where consecutive
    query heads share a key head (repeat_kv). With every head, a group's queries share one product with their key
    head; otherwise only the chosen heads and their key heads are read."""
    n_head, n_kv = q.shape[0], k.shape[0]
    if len(heads) == n_head and bool((heads == torch.arange(len(heads))).all()):
        rows = q.unflatten(0, (n_kv, -1)).flatten(1, 2)  # [kv head, its query heads x queries, d]
        return float_products(rows, k).unflatten(1, (-1, q.shape[1])).flatten(0, 1)
    return float_products(q[heads], expand_kv(k, n_head, heads))


def float_products(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """a [g, m, d] @ b [g, n, d]^T in float32: a.float() @ b.float().mT, with the longer side made float32 BLOCK
    elements at a time, so one column or a few rows of a long text never make a float32 copy of all its queries or
    keys (at 32,768 tokens and Llama-3-8B's shape that copy alone takes longer than the read)."""
    if a.dtype == torch.float32 and b.dtype == torch.float32:
        return a @ b.mT
    (g, m, d), n = a.shape, b.shape[1]
    step = max(1, BLOCK // (g * d))
    if max(m, n) <= step:
        return a.float() @ b.float().mT
    out = torch.empty(g, m, n, dtype=torch.float32, device=a.device)
    if m >= n:
        right = b.float().mT
        for i in range(0, m, step):
            out[:, i : i + step] = a[:, i : i + step].float() @ right
    else:
        left = a.float()
        for j in range(0, n, step):
            out[..., j : j + step] = left @ b[:, j : j + step].float().mT
    return out


@dataclass(frozen=True)
class LayerFacts:
    """What one layer's stages are made from, as numpy; None where the layer has no such thing (given weights have
    none of them). scale_on: where the model applied the scale (see LayerRecord). The mask is kept by its structure
    and made dense only when `mask` is read."""

    scale: float | None = None
    scale_on: ScaleOn | None = None
    fill: float | None = None
    structure: StructuredMask | None = None
    bias: np.ndarray | None = None  # [head or 1, query, key]
    softcap: float | None = None
    sinks: np.ndarray | None = None  # [head] or [head, query]

    @cached_property
    def mask(self) -> np.ndarray | None:
        """[query, key] bool, True = may attend (dense: tokens x tokens)."""
        return None if self.structure is None else self.structure.dense().cpu().numpy()


@dataclass(frozen=True, eq=False)
class Values:
    """A layer's values and what each head writes from each key (Kobayashi et al. 2020; attnviz.analysis.values).

    v       [kv_head, key, d_value]  values as the model used them (key/value heads not expanded, like k)
    written [head, key]              ||v[kv(h), j] @ W_O[h]||: what query head h writes into the residual stream from
                                     key j per unit of weight (attnviz.trace.output_norms), computed while tracing
    """

    v: torch.Tensor
    written: torch.Tensor

    def output_norms(self, heads, keys=ALL) -> torch.Tensor:
        """[head, key] float32 of `heads` for a window of keys."""
        return self.written[heads][:, keys].float()

    def of_heads(self, heads) -> torch.Tensor:
        """v [head, key, d_value] float32 of `heads`, value heads shared out as the model shares them."""
        return expand_kv(self.v, self.written.shape[0], heads).float()


@dataclass(frozen=True, eq=False)
class LayerRecord:
    """A recorded layer: what its stages are made from (one batch item).

    q     [head, query, d_head]       queries as the model used them
    k     [kv_head, key, d_head]      keys; kv_head divides head (grouped-query attention shares each)
    scores [head, query, key]         instead of q and k, for stages given as arrays (`from_scores`) or a score
                                      function that is not a dot product
    scale                              what the model multiplied q.k by
    mask  [query, key] bool           True = may attend, kept as a StructuredMask (a dense tensor given is recognised)
    fill                               what masked cells were replaced by before the softmax
    bias  [head or 1, query, key]     additive position bias (T5, ALiBi, a float mask), else None
    softcap                            logit softcapping (Gemma 2), else None
    sinks [head] or [head, query]      attention-sink logits, one per head (gpt-oss) or per query (Inkling 2), else None
    scale_on                           where the model applied the scale: "scores" (q.k * scale), "q" (OPT, ESM:
                                       q * scale before q.k), "k" (DeBERTa-v2: k * scale) or "q and k" (each by
                                       sqrt(scale)); q and k here are always unscaled, so scores = q.k and scaled =
                                       scores * scale in every case
    norms [head, query] x 2           each row's softmax normaliser (attnviz.trace.row_norms), computed from the record
                                       when not given (the seam gives them from the kernel that ran the layer)
    values                             the values and what each head writes from each key (`Values`), else None and
                                       no_values says why
    """

    q: torch.Tensor | None
    k: torch.Tensor | None
    scale: float
    mask: torch.Tensor
    fill: float
    bias: torch.Tensor | None = None
    scores: torch.Tensor | None = None
    softcap: float | None = None
    sinks: torch.Tensor | None = None
    scale_on: ScaleOn = "scores"
    norms: RowNorms | None = None
    values: Values | None = None
    no_values: str = NO_VALUES

    def __post_init__(self):
        object.__setattr__(self, "mask", as_structured(self.mask))
        if self.norms is None:
            with torch.inference_mode():
                object.__setattr__(self, "norms", record_norms(self))

    @property
    def shape(self) -> tuple[int, int, int]:
        """(head, query, key)."""
        if self.scores is not None:
            return tuple(self.scores.shape)
        return (self.q.shape[0], self.q.shape[1], self.k.shape[1])

    @property
    def n_kv(self) -> int:
        return self.shape[0] if self.k is None else self.k.shape[0]

    def missing(self, stage: str) -> str | None:
        if stage == "vectors" and self.q is None:
            return "it keeps its scores, not query and key vectors (a score that is not a dot product, or saved scores)"
        if stage == "values" and self.values is None:
            return self.no_values or NO_VALUES
        return None

    def stages(self, heads=None, queries=ALL, keys=ALL, scale=None, mask=None, fill=None) -> Stages:
        """The four stages [head, query, key] of `heads` (a LongTensor, None = all) for a window of queries and keys.
        A window of keys is computed alone, its weights exact from the row norms; otherwise every key of the rows is
        computed and softmaxed as the model does. scale / mask / fill: a what-if in place of the record's (whole
        rows, since the norms describe the record's own rows)."""
        heads = _every(heads, self.shape[0])
        if keys != ALL and scale is None and mask is None and fill is None:
            return self.window(heads, queries, keys)
        mask = self.mask.rows(queries) if mask is None else torch.as_tensor(mask, dtype=torch.bool)[queries]
        out = stages_from_scores(
            self.raw_scores(heads, queries),
            self.scale if scale is None else scale,
            mask.to(self.mask.device),
            self.fill if fill is None else fill,
            bias=self._bias(heads, queries),
            softcap=self.softcap,
            sinks=self._sink_logits(heads, queries),
        )
        return out if keys == ALL else Stages(*(s[..., keys].contiguous() for s in out))

    def window(self, heads, queries=ALL, keys=ALL) -> Stages:
        """The stages of a window of cells alone: scores, scaled and masked as `stages_from_scores` makes them, the
        weights exp(masked - lse) from the row norms, so no cell outside the window is computed."""
        scores = self.raw_scores(heads, queries, keys)
        scaled, masked = masked_from_scores(
            scores, self.scale, self.mask.rows(queries, keys), self.fill, self._bias(heads, queries, keys), self.softcap
        )
        return Stages(scores, scaled, masked, self.norms.pick(heads, queries).weights(masked))

    def column(self, key: int, heads) -> torch.Tensor:
        """[head, query] the weight every query gives `key`, exact from the row norms: one score per query, so memory
        grows with the tokens, not their square."""
        return self.window(heads, ALL, slice(key, key + 1)).weights[..., 0]

    def lse(self, heads) -> torch.Tensor:
        return self.norms.pick(heads).lse

    def raw_scores(self, heads, queries=ALL, keys=ALL) -> torch.Tensor:
        """q.k^T in float32, [head, query, key]; grouped-query heads read their shared key head (repeat_kv)."""
        if self.scores is not None:
            return self.scores[heads][:, queries][..., keys].float()
        return grouped_products(self.q[:, queries], self.k[:, keys], heads)

    def _bias(self, heads, queries=ALL, keys=ALL) -> torch.Tensor | None:
        return None if self.bias is None else self.bias.expand(self.shape[0], -1, -1)[heads][:, queries, keys].float()

    def vectors(self, heads) -> tuple[torch.Tensor, torch.Tensor]:
        """(q [head, query, d_head], k [head, key, d_head]) in float32 for `heads`, key heads shared out."""
        return self.q[heads].float(), expand_kv(self.k, self.shape[0], heads).float()

    def _sink_row(self, heads, queries) -> torch.Tensor | None:
        """The sink logit of every row of the window, [head, query] (the norms count it once per row)."""
        sinks = self._sink_logits(heads, queries)
        if sinks is None or sinks.dim() == 2:
            return sinks
        return sinks[:, None].expand(-1, len(range(*queries.indices(self.shape[1]))))

    def _sink_logits(self, heads, queries) -> torch.Tensor | None:
        if self.sinks is None:
            return None
        sinks = self.sinks.float()[heads]
        return sinks if sinks.dim() == 1 else sinks[:, queries]

    def facts(self) -> LayerFacts:
        return LayerFacts(
            float(self.scale),
            self.scale_on,
            float(self.fill),
            self.mask,
            _numpy(self.bias),
            self.softcap,
            _numpy(self.sinks),
        )

    def tensors(self) -> tuple[torch.Tensor, ...]:
        values = () if self.values is None else (self.values.v, self.values.written)
        held = (self.q, self.k, *values, self.bias, self.scores, self.sinks, *self.mask.tensors(), *self.norms)
        return tuple(t for t in held if t is not None)


def norm_blocks(mask, n_head: int, n_query: int, cells: int | None = None):
    """(rows, keys) slices covering every query row, a block at a time, each block's reachable cells (n_head x rows x
    the keys its band reaches) within `cells` (NORM_CELLS) unless one row alone is more: a block is sized from its
    first row's span, then shrunk while its own span (wider further down a causal band) puts it over."""
    cells, a = NORM_CELLS if cells is None else cells, 0
    while a < n_query:
        lo, hi = mask.key_span(slice(a, a + 1))
        b = min(n_query, a + max(1, cells // (n_head * max(1, hi - lo))))
        lo, hi = mask.key_span(slice(a, b))
        while b - a > 1 and n_head * (b - a) * (hi - lo) > cells:
            b = a + max(1, cells // (n_head * max(1, hi - lo)))
            lo, hi = mask.key_span(slice(a, b))
        yield slice(a, b), slice(lo, hi)
        a = b


def record_norms(record: LayerRecord) -> RowNorms:
    """Every row's softmax normaliser, from the masked scores of a few query rows at a time and only the keys the
    mask's band can reach (the rest hold the fill and are added exactly by `row_norms.with_hidden`)."""
    heads, (n_head, n_query, n_key) = _every(None, record.shape[0]), record.shape
    parts = []
    for rows, keys in norm_blocks(record.mask, n_head, n_query):
        _, masked = masked_from_scores(
            record.raw_scores(heads, rows, keys),
            record.scale,
            record.mask.rows(rows, keys),
            record.fill,
            record._bias(heads, rows, keys),
            record.softcap,
        )
        norms = row_norms.norms_of(masked, record._sink_row(heads, rows))
        parts.append(row_norms.with_hidden(norms, n_key - (keys.stop - keys.start), record.fill))
    return row_norms.cat(parts)


@dataclass(frozen=True, eq=False)
class GivenWeights:
    """A layer known only by its softmax weights [head, query, key] (float32): `why` says why there is nothing else."""

    weights: torch.Tensor
    why: str = "only the final weights were given"

    @property
    def shape(self) -> tuple[int, int, int]:
        return tuple(self.weights.shape)

    @property
    def n_kv(self) -> int:
        return self.shape[0]  # the sharing of key heads is unknown: each head is its own group

    def missing(self, stage: str) -> str | None:
        return None if stage == "weights" else self.why

    def stages(self, heads=None, queries=ALL, keys=ALL, **what_if) -> Stages:
        return Stages(None, None, None, self.weights[_every(heads, self.shape[0])][:, queries, keys])

    def column(self, key: int, heads) -> torch.Tensor:
        return self.weights[heads][:, :, key]

    def lse(self, heads) -> torch.Tensor:
        raise AttnvizError(f"This trace keeps no log-sum-exp of its rows: {self.why}.")

    def facts(self) -> LayerFacts:
        return LayerFacts()

    def tensors(self) -> tuple[torch.Tensor, ...]:
        return (self.weights,)


def weights_alone(layer: LayerRecord | GivenWeights, heads=None, queries=ALL, keys=ALL, out=None) -> torch.Tensor:
    """`layer.stages(heads, queries, keys).weights` without the other three stages: a recorded layer's whole rows are
    computed in place on their scores (`weights_from_scores`, the same numbers), and so is a first window of keys
    that holds every weight of its rows (`holds_the_rows`: the rest are hidden, exactly 0); any other window of keys,
    whose weights come from the row norms, and given weights are read as `stages` reads them. out: a float32 tensor
    of the result's shape to write the weights into."""
    if not isinstance(layer, LayerRecord) or not (keys == ALL or holds_the_rows(layer, queries, keys)):
        weights = layer.stages(heads, queries, keys).weights
        return weights if out is None else out.copy_(weights)
    heads = _every(heads, layer.shape[0])
    mask = layer.mask.rows(queries, keys).to(layer.mask.device)
    return weights_from_scores(
        layer.raw_scores(heads, queries, keys),
        layer.scale,
        mask,
        layer.fill,
        layer._bias(heads, queries, keys),
        layer.softcap,
        layer._sink_logits(heads, queries),
        out=out,
    )


def holds_the_rows(layer: LayerRecord, queries=ALL, keys=ALL) -> bool:
    """Whether keys 0..stop-1 hold every weight of the rows `queries`: the mask hides every later key from each row
    and lets each row see one of these at least, and the fill is so low (HIDDEN_FILL) that a hidden key's weight,
    exp(fill - the row's largest score), is exactly 0 in float32. The softmax over those keys is then the row's: a
    causal window of queries reads its triangle's keys, not the keys ahead of it that only hold the fill."""
    start, stop, step = keys.indices(layer.shape[2])
    if start != 0 or step != 1 or not layer.fill <= HIDDEN_FILL:
        return False
    if layer.mask.key_span(queries)[1] > stop and bool(layer.mask.rows(queries, slice(stop, None)).any()):
        return False
    return bool(layer.mask.rows(queries, keys).any(-1).all())


def check_layers(layers, n_query: int, n_key: int) -> None:
    """An AttnvizError unless every layer is [head, n_query, n_key] with one head count and kv heads that divide it."""
    if not layers:
        raise AttnvizError("a trace needs at least one layer (recorded, or given weights)")
    n_head = layers[0].shape[0]
    for i, layer in enumerate(layers):
        if layer.shape != (n_head, n_query, n_key) or n_head % layer.n_kv:
            raise AttnvizError(f"layer {i}: {layer.shape} (head, query, key) does not match the tokens")
        mask = getattr(layer, "mask", None)
        if mask is not None and tuple(mask.shape) != (n_query, n_key):
            raise AttnvizError(f"layer {i}: mask has shape {tuple(mask.shape)}, expected {(n_query, n_key)}")
