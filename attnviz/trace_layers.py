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

import numpy as np
import torch

from .attention import Stages, check_scale, stages_from_scores
from .errors import AttnvizError

STAGES = ("scores", "scaled", "masked", "weights")
#: What a trace may be asked for with `has`: the four stages, and the query and key vectors (the neuron view).
CAPABILITIES = (*STAGES, "vectors")
QUERY_CHUNK = 256  # query rows per step of a column: memory stays linear in the tokens
ALL = slice(None)


def kv_groups(n_head: int, n_kv: int) -> tuple[tuple[int, ...], ...]:
    """Query heads that share each key/value head, in transformers' repeat_kv layout: head h uses kv head
    h // (n_head / n_kv)."""
    per = n_head // n_kv
    return tuple(tuple(range(g * per, (g + 1) * per)) for g in range(n_kv))


def _every(heads, n_head: int) -> torch.Tensor:
    return torch.arange(n_head) if heads is None else heads


def _numpy(t: torch.Tensor | None) -> np.ndarray | None:
    return None if t is None else t.detach().float().cpu().numpy()


@dataclass(frozen=True)
class LayerFacts:
    """What one layer's stages are made from, as numpy; None where the layer has no such thing (given weights have
    none of them). scale_on: where the model applied the scale (see LayerRecord)."""

    scale: float | None = None
    scale_on: str | None = None
    fill: float | None = None
    mask: np.ndarray | None = None  # [query, key] bool, True = may attend
    bias: np.ndarray | None = None  # [head or 1, query, key]
    softcap: float | None = None
    sinks: np.ndarray | None = None  # [head] or [head, query]


@dataclass(frozen=True, eq=False)
class LayerRecord:
    """A recorded layer: what its stages are made from (one batch item).

    q     [head, query, d_head]       queries as the model used them
    k     [kv_head, key, d_head]      keys; kv_head divides head (grouped-query attention shares each)
    scores [head, query, key]         instead of q and k, for stages given as arrays (`from_scores`) or a score
                                      function that is not a dot product
    scale                              what the model multiplied q.k by
    mask  [query, key] bool           True = may attend
    fill                               what masked cells were replaced by before the softmax
    bias  [head or 1, query, key]     additive position bias (T5, ALiBi, a float mask), else None
    softcap                            logit softcapping (Gemma 2), else None
    sinks [head] or [head, query]      attention-sink logits, one per head (gpt-oss) or per query (Inkling 2), else None
    scale_on                           where the model applied the scale: "scores" (q.k * scale), "q" (OPT, ESM:
                                       q * scale before q.k), "k" (DeBERTa-v2: k * scale) or "q and k" (each by
                                       sqrt(scale)); q and k here are always unscaled, so scores = q.k and scaled =
                                       scores * scale in every case
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
    scale_on: str = "scores"

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
        return None

    def stages(self, heads=None, queries=ALL, keys=ALL, scale=None, mask=None, fill=None) -> Stages:
        """The four stages [head, query, key] of `heads` (a LongTensor, None = all) for a window of queries and keys:
        every key stays in the softmax, the keys are cut afterwards. scale / mask / fill: a what-if in place of the
        record's."""
        heads = _every(heads, self.shape[0])
        mask = self.mask if mask is None else torch.as_tensor(mask, dtype=torch.bool, device=self.mask.device)
        bias = None if self.bias is None else self.bias.expand(self.shape[0], -1, -1)[heads][:, queries].float()
        out = stages_from_scores(
            self.raw_scores(heads, queries),
            self.scale if scale is None else scale,
            mask[queries],
            self.fill if fill is None else fill,
            bias=bias,
            softcap=self.softcap,
            sinks=self._sink_logits(heads, queries),
        )
        return out if keys == ALL else Stages(*(s[..., keys].contiguous() for s in out))

    def column(self, key: int, heads) -> torch.Tensor:
        """[head, query] the weight every query gives `key`: each row's softmax over all its keys, QUERY_CHUNK rows at
        a time, so memory grows with the tokens, not their square."""
        chunks = range(0, self.shape[1], QUERY_CHUNK)
        return torch.cat([self.stages(heads, slice(a, a + QUERY_CHUNK)).weights[..., key] for a in chunks], dim=-1)

    def raw_scores(self, heads, queries=ALL) -> torch.Tensor:
        """q.k^T in float32, [head, query, key]; grouped-query heads read their shared key head (repeat_kv)."""
        if self.scores is not None:
            return self.scores[heads][:, queries].float()
        q, k = self.vectors(heads)
        return q[:, queries] @ k.transpose(-2, -1)

    def vectors(self, heads) -> tuple[torch.Tensor, torch.Tensor]:
        """(q [head, query, d_head], k [head, key, d_head]) in float32 for `heads`, key heads shared out."""
        kv = torch.div(heads, self.shape[0] // self.n_kv, rounding_mode="floor")
        return self.q[heads].float(), self.k[kv].float()

    def _sink_logits(self, heads, queries) -> torch.Tensor | None:
        if self.sinks is None:
            return None
        sinks = self.sinks.float()[heads]
        return sinks if sinks.dim() == 1 else sinks[:, queries]

    def facts(self) -> LayerFacts:
        return LayerFacts(float(self.scale), self.scale_on, float(self.fill), self.mask.cpu().numpy(),
                          _numpy(self.bias), self.softcap, _numpy(self.sinks))  # fmt: skip

    def tensors(self) -> tuple[torch.Tensor, ...]:
        return tuple(t for t in (self.q, self.k, self.mask, self.bias, self.scores, self.sinks) if t is not None)


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

    def facts(self) -> LayerFacts:
        return LayerFacts()

    def tensors(self) -> tuple[torch.Tensor, ...]:
        return (self.weights,)


def records_from_scores(scores, scale, mask=None, fill=None, bias=None) -> tuple[LayerRecord, ...]:
    """Recorded layers from stage arrays: scores [layer, head, query, key], scale one number or [layer], mask
    [layer, query, key] (True = may attend; None: all), fill one number or [layer], bias [layer, head, query, key]."""
    scores = torch.as_tensor(np.asarray(scores, np.float32))
    n_layer = scores.shape[0]
    per = lambda v: np.broadcast_to(np.asarray(v, np.float64).reshape(-1), (n_layer,))  # noqa: E731
    masks = torch.ones(n_layer, *scores.shape[2:], dtype=torch.bool) if mask is None else mask
    masks = torch.as_tensor(np.asarray(masks, bool))
    biases = [None] * n_layer if bias is None else [torch.as_tensor(np.asarray(b)) for b in bias]
    return tuple(
        LayerRecord(None, None, check_scale(s), m, float(f), b, x)
        for x, s, m, f, b in zip(scores.clone(), per(scale), masks, per(fill), biases)
    )


def given_layers(weights, why: str) -> tuple[GivenWeights, ...]:
    """Layers of given weights [layer, head, query, key]; `why` says why there are no other stages."""
    w = np.array(weights, dtype=np.float32)  # a copy: nobody else holds a reference that could change it
    if w.ndim != 4:
        raise AttnvizError(f"weights need 4 axes [layer, head, query, key], got shape {w.shape}")
    return tuple(GivenWeights(torch.from_numpy(a.copy()), why) for a in w)


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
