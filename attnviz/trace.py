"""AttentionTrace: the record of what attention did on one input, every layer and head.

Axes everywhere: [layer, head, query, key]; query and key lengths may differ (cross-attention).

A trace stores what the stages are made from, per layer: q and k as the model used them (after position
encoding; k with its key/value heads not yet shared out), the scale, the boolean mask (True = may attend),
the fill for masked cells and any additive bias. A layer's four stages are computed when asked for, so a
trace grows linearly with the tokens, not with their square. Families whose attention code cannot be
reached give only their final weights: a weights-only trace stores those.
"""

from __future__ import annotations

import importlib
import threading
from dataclasses import dataclass, field

import numpy as np
import torch

from .attention import DEFAULT_FILL, Stages, check_scale, stages_from_scores
from .errors import AttnvizError, check_index
from .given import weights_array

STAGES = ("scores", "scaled", "masked", "weights")
_LAYER_CACHE = 2  # computed layers (or windows) kept per trace: a page switching stages or heads does not recompute


@dataclass(frozen=True, eq=False)
class LayerRecord:
    """What one layer's stages are made from (one batch item).

    q     [head, query, d_head]       queries as the model used them
    k     [kv_head, key, d_head]      keys; kv_head divides head (grouped-query attention shares each)
    scores [head, query, key]         instead of q and k, for stages given as arrays (`from_scores`)
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
    def n_head(self) -> int:
        return (self.q if self.scores is None else self.scores).shape[0]

    @property
    def n_query(self) -> int:
        return (self.q if self.scores is None else self.scores).shape[1]

    @property
    def n_key(self) -> int:
        return self.k.shape[1] if self.scores is None else self.scores.shape[2]

    def stages(self, heads=None, queries: slice | None = None, scale=None, mask=None, fill=None) -> Stages:
        """The four stages in float32 torch tensors [head, query, key] (on the record's device)."""
        heads = slice(None) if heads is None else heads
        queries = slice(None) if queries is None else queries
        mask = self.mask if mask is None else torch.as_tensor(mask, dtype=torch.bool, device=self.mask.device)
        bias = None if self.bias is None else self.bias.expand(self.n_head, -1, -1)[heads, queries].float()
        return stages_from_scores(
            self.raw_scores(heads, queries),
            self.scale if scale is None else scale,
            mask[queries],
            self.fill if fill is None else fill,
            bias=bias,
            softcap=self.softcap,
            sinks=self.sink_logits(heads, queries),
        )

    def sink_logits(self, heads=slice(None), queries=slice(None)) -> torch.Tensor | None:
        """The sink logits for these heads (and queries, when there is one per query) in float32, else None."""
        if self.sinks is None:
            return None
        sinks = self.sinks.float()[heads]
        return sinks if sinks.dim() == 1 else sinks[:, queries]

    def raw_scores(self, heads=slice(None), queries=slice(None)) -> torch.Tensor:
        """q.k^T in float32, [head, query, key]."""
        if self.scores is not None:
            return self.scores[heads, queries].float()
        q, k = self.q, self.k
        if k.shape[0] != q.shape[0]:  # grouped-query attention: each key head serves several query heads
            k = k.repeat_interleave(q.shape[0] // k.shape[0], dim=0)
        return q[heads, queries].float() @ k[heads].float().transpose(-2, -1)

    def tensors(self) -> tuple[torch.Tensor, ...]:
        return tuple(t for t in (self.q, self.k, self.mask, self.bias, self.scores, self.sinks) if t is not None)


def _held_bytes(tensors) -> int:
    """Bytes of the distinct storages behind `tensors`: views of one buffer (a mask or bias shared by every
    layer, q and k cut from one projection) count once, and so does what a view keeps alive."""
    storages = {}
    for t in tensors:
        st = t.untyped_storage()
        storages[(t.device, st.data_ptr())] = st.nbytes()
    return sum(storages.values())


@dataclass(frozen=True)
class Provenance:
    """What produced a trace, so anyone can reproduce it."""

    model: str = ""  # the model's label (hub id, folder, "all-MiniLM-L6-v2 (bundled)" or our module's description)
    kind: str = "pretrained"  # "pretrained", "module" (our MultiHeadAttention) or "attentions" (given weights)
    revision: str = ""
    dtype: str = "float32"
    device: str = "cpu"
    attn_implementation: str = ""
    options: tuple = ()  # the experiment, as sorted (name, value) pairs
    input_ids: tuple[int, ...] = ()
    n_dropped: int = 0  # tokens cut off because the text was longer than the limit


def _read_only(a, dtype) -> np.ndarray:
    a = np.array(a, dtype=dtype)  # always a copy: nobody else holds a reference that could change it
    a.setflags(write=False)
    return a


def _frozen_numpy(t: torch.Tensor) -> np.ndarray:
    """A freshly computed float32 tensor as a read-only numpy array, without a copy when it is already on the CPU."""
    a = t.detach().to("cpu", torch.float32).numpy()
    a.setflags(write=False)
    return a


@dataclass(frozen=True, eq=False)
class AttentionTrace:
    """Every stage of attention for one input; numpy out, axis order [layer, head, query, key].

    Per layer (the normal path, what pages use): `layer(i)` -> Stages of [head, query, key] float32 arrays,
    `head(i, h, queries=...)` for one head or a window of queries. Whole-trace arrays (`weights`, `scores`,
    `scaled`, `masked`, `mask`, `scale`, `fill`) stack every layer and suit small traces.
    """

    tokens: tuple[str, ...]  # query tokens
    records: tuple[LayerRecord, ...] | None = None
    stored_weights: np.ndarray | None = None  # [layer, head, query, key] for weights-only traces
    key_tokens: tuple[str, ...] | None = None  # None: the same as tokens (self-attention)
    d_head: int = 0
    provenance: Provenance = field(default_factory=Provenance)
    notes: tuple[str, ...] = ()
    _cache: dict = field(default_factory=dict, init=False, repr=False)
    _memo: dict = field(default_factory=dict, init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    def __post_init__(self):
        set_ = lambda k, v: object.__setattr__(self, k, v)  # noqa: E731 (frozen dataclass)
        set_("tokens", tuple(str(t) for t in self.tokens))
        set_("key_tokens", self.tokens if self.key_tokens is None else tuple(str(t) for t in self.key_tokens))
        set_("notes", tuple(self.notes))
        if (self.records is None) == (self.stored_weights is None):
            raise AttnvizError("a trace needs either layer records or weights, not both")
        if self.records is not None:
            set_("records", tuple(self.records))
            self._check_records()
        else:
            set_("stored_weights", _read_only(self.stored_weights, np.float32))
            w = self.stored_weights
            if w.ndim != 4 or w.shape[2:] != (len(self.tokens), len(self.key_tokens)):
                raise AttnvizError(f"weights {w.shape} do not match {len(self.tokens)} x {len(self.key_tokens)} tokens")

    def _check_records(self) -> None:
        if not self.records:
            raise AttnvizError("a trace needs at least one layer")
        n_q, n_k, n_head = len(self.tokens), len(self.key_tokens), self.records[0].n_head
        for i, r in enumerate(self.records):
            grouped = r.scores is not None or n_head % r.k.shape[0] == 0
            if (r.n_head, r.n_query, r.n_key) != (n_head, n_q, n_k) or not grouped:
                raise AttnvizError(f"layer {i}: {r.n_head} heads x {r.n_query} x {r.n_key} do not match the tokens")
            if tuple(r.mask.shape) != (n_q, n_k):
                raise AttnvizError(f"layer {i}: mask has shape {tuple(r.mask.shape)}, expected {(n_q, n_k)}")

    @classmethod
    def from_scores(cls, tokens, scores, scale, mask=None, fill=DEFAULT_FILL, bias=None, **kw) -> AttentionTrace:
        """A trace from stage arrays: scores [layer, head, query, key], scale one number or [layer],
        mask [layer, query, key] (True = may attend), fill one number or [layer], bias [layer, head, query, key]."""
        scores = torch.as_tensor(np.asarray(scores, np.float32))
        n_layer = scores.shape[0]
        per = lambda v: np.broadcast_to(np.asarray(v, np.float64).reshape(-1), (n_layer,))  # noqa: E731
        masks = torch.ones(scores.shape[0], *scores.shape[2:], dtype=torch.bool) if mask is None else mask
        masks = torch.as_tensor(np.asarray(masks, bool))
        records = [
            LayerRecord(None, None, check_scale(s), m, float(f), None if bias is None else torch.as_tensor(b), x)
            for x, s, m, f, b in zip(scores.clone(), per(scale), masks, per(fill), bias if bias is not None else masks)
        ]
        return cls(tokens, records=tuple(records), **kw)

    @classmethod
    def from_attentions(cls, attentions, tokens, key_tokens=None, model: str = "", item: int = 0) -> AttentionTrace:
        """A weights-only trace from what a transformers model returns with output_attentions=True: one
        [batch, head, query, key] tensor per layer (any dtype or device, gradients or not); batch item `item`.
        SDPA's empty tuple or None raise an InputError saying what to do (see attnviz.given)."""
        weights = weights_array(attentions, item)
        return cls(tokens, stored_weights=weights, key_tokens=key_tokens, provenance=Provenance(model, "attentions"))

    # --- sizes and kind ---
    @property
    def n_layer(self) -> int:
        return len(self.records) if self.records is not None else self.stored_weights.shape[0]

    @property
    def n_head(self) -> int:
        return self.records[0].n_head if self.records is not None else self.stored_weights.shape[1]

    @property
    def n_tokens(self) -> int:
        """Query tokens (equal to the key tokens except in cross-attention)."""
        return len(self.tokens)

    @property
    def n_keys(self) -> int:
        return len(self.key_tokens)

    @property
    def weights_only(self) -> bool:
        return self.records is None

    @property
    def stages(self) -> tuple[str, ...]:
        """The stages this trace can show: all four, or only ("weights",) for a weights-only trace."""
        return ("weights",) if self.weights_only else STAGES

    @property
    def model_name(self) -> str:
        return self.provenance.model

    @property
    def options(self) -> tuple:
        return self.provenance.options

    @property
    def nbytes(self) -> int:
        """Bytes the trace holds: the distinct buffers behind its records (a shared mask counts once)."""
        if self.weights_only:
            return int(self.stored_weights.nbytes)
        return _held_bytes(t for r in self.records for t in r.tensors())

    # --- per layer: the normal path ---
    def layer(self, layer: int) -> Stages:
        """One layer's stages as read-only float32 numpy arrays [head, query, key] (weights only: the others None)."""
        layer = check_index("layer", layer, self.n_layer)
        if self.weights_only:
            return Stages(None, None, None, self.stored_weights[layer])
        return self._recent(layer, lambda: self.records[layer].stages())

    def _recent(self, key, compute) -> Stages:
        """Stages computed by `compute` (torch), kept among the _LAYER_CACHE most recently used layers or windows."""
        with self._lock:
            hit = self._cache.pop(key, None)
            if hit is not None:
                self._cache[key] = hit  # most recently used last
                return hit
        with torch.inference_mode():
            out = Stages(*(_frozen_numpy(s) for s in compute()))
        with self._lock:
            self._cache[key] = out
            while len(self._cache) > _LAYER_CACHE:
                self._cache.pop(next(iter(self._cache)))
        return out

    def _repr_html_(self) -> str:
        """A notebook draws a trace as the Heads page does: every head of layer 0, head 0, every layer x head."""
        # the views import this module, so they are reached when a notebook asks, never at import time
        return importlib.import_module(".notebook", __package__).trace_html(self)

    def memo(self, key, compute):
        """A small result derived from this trace (a pooled overview, per-head statistics), computed once.

        For results much smaller than a layer's stages: they are kept as long as the trace is.
        """
        with self._lock:
            if key in self._memo:
                return self._memo[key]
        value = compute()
        with self._lock:
            return self._memo.setdefault(key, value)

    def head(self, layer: int, head: int, queries: tuple[int, int] | None = None) -> Stages:
        """One head's stages [query, key], optionally for queries start..stop only (every key is kept)."""
        layer = check_index("layer", layer, self.n_layer)
        head = check_index("head", head, self.n_head)
        rows = slice(None) if queries is None else slice(int(queries[0]), int(queries[1]))
        if self.weights_only:
            return Stages(None, None, None, self.stored_weights[layer, head, rows])
        with torch.inference_mode():
            stages = self.records[layer].stages(heads=slice(head, head + 1), queries=rows)
        return Stages(*(s[0].cpu().numpy() for s in stages))

    def window(self, layer: int, queries: tuple[int, int], keys: tuple[int, int] | None = None) -> Stages:
        """Every head's stages for queries start..stop and keys start..stop, [head, query, key].

        Computed where the record lives (the GPU for a GPU model) with every key in the softmax, then cut, so a
        long text moves only the window to the host.
        """
        layer = check_index("layer", layer, self.n_layer)
        keys = queries if keys is None else keys
        rows, cols = slice(int(queries[0]), int(queries[1])), slice(int(keys[0]), int(keys[1]))
        if self.weights_only:
            return Stages(None, None, None, self.stored_weights[layer, :, rows, cols])
        if (rows, cols) == (slice(0, self.n_tokens), slice(0, self.n_keys)):
            return self.layer(layer)
        key = (layer, rows.start, rows.stop, cols.start, cols.stop)  # a page asks for the same window more than once
        return self._recent(key, lambda: (s[..., cols].contiguous() for s in self.records[layer].stages(queries=rows)))

    def stage(self, name: str, layer: int | None = None) -> np.ndarray:
        """One stage by name: [head, query, key] of one layer, or [layer, head, query, key] when layer is None."""
        if name not in STAGES:
            raise AttnvizError(f"unknown stage {name!r}; choose one of {', '.join(STAGES)}")
        if name not in self.stages:
            raise AttnvizError(
                f"the {name!r} stage was not captured for {self.model_name}: this model family computes attention "
                "inside its own code, so only the final weights are available."
            )
        if layer is not None:
            return getattr(self.layer(layer), name)
        out = np.stack([getattr(self.layer(i), name) for i in range(self.n_layer)])
        out.setflags(write=False)
        return out

    def recompute(self, layer: int, scale: float | None = None, mask=None, fill: float | None = None) -> Stages:
        """What-if without a new forward pass: one layer's stages with another scale, mask or fill.

        Only this layer changes: later layers still saw the original weights. Returns numpy [head, query, key].
        """
        if self.weights_only:
            raise AttnvizError(f"{self.model_name} gave weights only; there are no scores to recompute from.")
        layer = check_index("layer", layer, self.n_layer)
        scale = None if scale is None else check_scale(scale)
        with torch.inference_mode():
            stages = self.records[layer].stages(scale=scale, mask=mask, fill=fill)
        return Stages(*(s.cpu().numpy() for s in stages))

    # --- whole-trace arrays (small traces) ---
    @property
    def weights(self) -> np.ndarray:
        return self.stage("weights")

    @property
    def scores(self) -> np.ndarray | None:
        return None if self.weights_only else self.stage("scores")

    @property
    def scaled(self) -> np.ndarray | None:
        return None if self.weights_only else self.stage("scaled")

    @property
    def masked(self) -> np.ndarray | None:
        return None if self.weights_only else self.stage("masked")

    @property
    def scale(self) -> np.ndarray | None:
        """[layer] the scale each layer applied to q.k."""
        return None if self.weights_only else np.array([r.scale for r in self.records], np.float64)

    @property
    def scale_on(self) -> tuple[str, ...] | None:
        """[layer] where each layer's model applied its scale: "scores", "q" or "q and k" (see LayerRecord)."""
        return None if self.weights_only else tuple(r.scale_on for r in self.records)

    @property
    def fill(self) -> np.ndarray | None:
        return None if self.weights_only else np.array([r.fill for r in self.records], np.float64)

    @property
    def mask(self) -> np.ndarray | None:
        """[layer, query, key] bool, True = may attend."""
        return None if self.weights_only else np.stack([r.mask.cpu().numpy() for r in self.records])

    def layer_mask(self, layer: int) -> np.ndarray | None:
        return None if self.weights_only else self.records[check_index("layer", layer, self.n_layer)].mask.cpu().numpy()

    @property
    def has_bias(self) -> bool:
        return not self.weights_only and any(r.bias is not None for r in self.records)
