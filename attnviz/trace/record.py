"""AttentionTrace: the record of what attention did on one input, every layer and head.

Axes everywhere: [layer, head, query, key]; query and key lengths may differ (cross-attention).

A trace is a list of layers of one of two kinds (attnviz.trace.layers): recorded layers, which keep what the stages are
made from (q and k as the model used them, the scale, the mask, the fill, any bias, softcap or sinks) and compute a
window's stages when asked, so a trace grows linearly with the tokens; or given weights, for families whose attention
code cannot be read. Every reader asks the same way: `stages(layer, heads=, queries=, keys=)` for a window,
`column(layer, key)` for one key, `has(stage)` / `why_not(stage)` for what the trace can give. It also keeps the
tokenizer's word ids and sequence ids for both sides, where the tokenizer gave them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import torch

from .. import checks
from ..attention import DEFAULT_FILL, Stage, Stages, check_scale
from ..errors import AttnvizError, InputError, check_index
from .from_arrays import given_layers, records_from_scores
from .generation import Generation
from .given import weights_array
from .layers import (
    CAPABILITIES,
    STAGES,
    Capability,
    GivenWeights,
    LayerFacts,
    LayerRecord,
    Values,
    check_layers,
    kv_groups,
)
from .reads import frozen, frozen_mask, frozen_stages, head_index, held_bytes, span, stacked, token_ids, what_if
from .values import ValueReads

__all__ = ["STAGES", "AttentionTrace", "GivenWeights", "LayerFacts", "LayerRecord", "Provenance", "Values"]

#: How a notebook draws a trace: attnviz.notebook puts its view here when imported (trace -> its figures, drawn with
#: the pages' figure code, which reads traces: registering keeps every import pointing down to this module).
NOTEBOOK_VIEW: list = []

_WHAT = {
    "vectors": "query and key vectors",
    "values": "value vectors",
}  # what `why_not` calls a capability; the stages by their own names


#: What produced a trace: a pretrained model, our own MultiHeadAttention, or attention weights handed in.
SourceKind = Literal["pretrained", "module", "attentions"]


@dataclass(frozen=True)
class Provenance:
    """What produced a trace, so anyone can reproduce it, and the facts pages draw from that (rather than its kind)."""

    model: str = ""  # the model's label (hub id, folder, "all-MiniLM-L6-v2 (bundled)" or our module's description)
    kind: SourceKind = "pretrained"
    revision: str = ""
    dtype: str = "float32"
    device: str = "cpu"
    attn_implementation: str = ""
    options: tuple = ()  # the experiment, as sorted (name, value) pairs
    input_ids: tuple[int, ...] = ()
    n_dropped: int = 0  # tokens cut off because the text was longer than the limit

    def __post_init__(self):
        checks.text("model", self.model)

    @property
    def single_layer(self) -> bool:
        """One attention layer of its own (our module): its layer 0 is no model's layer 0."""
        return self.kind == "module"

    def layer_label(self, layer: int) -> str:
        """What a layer of this trace is called on a page: 'layer 3', or 'our module' for our single layer."""
        return "our module" if self.single_layer else f"layer {layer}"

    @property
    def short_label(self) -> str:
        """The source in a file name: the model's label, or 'module' for our module (its description is long)."""
        return "module" if self.single_layer else self.model


@dataclass(frozen=True, eq=False)
class AttentionTrace(ValueReads):
    """Every stage of attention for one input; numpy out, axis order [layer, head, query, key].

    Whole-trace arrays (`weights`, `scores`, `scaled`, `masked`, `mask`, `scale`, `fill`) stack every layer and suit
    small traces; pages read a window with `stages`."""

    tokens: tuple[str, ...]  # query tokens
    layers: tuple[LayerRecord | GivenWeights, ...] = ()
    key_tokens: tuple[str, ...] | None = None  # None: the same as tokens (self-attention)
    d_head: int = 0
    provenance: Provenance = field(default_factory=Provenance)
    notes: tuple[str, ...] = ()
    word_ids: tuple | None = None  # the tokenizer's word of each query token (None: special tokens, padding)
    sequence_ids: tuple | None = None  # 0 = the first text, 1 = the second of a pair, None = special tokens
    key_word_ids: tuple | None = None  # the key side's, given only when keys are other tokens (cross-attention)
    key_sequence_ids: tuple | None = None
    generation: Generation | None = None  # a generated continuation: which tokens are prompt, which output (generate)

    def __post_init__(self):
        set_ = lambda k, v: object.__setattr__(self, k, v)  # noqa: E731 (frozen dataclass)
        self_attention = self.key_tokens is None
        set_("tokens", checks.tokens("tokens", self.tokens))
        set_("key_tokens", self.tokens if self_attention else checks.tokens("key_tokens", self.key_tokens))
        set_("notes", tuple(self.notes))
        set_("layers", tuple(self.layers))
        for name in ("word_ids", "sequence_ids"):  # the key side is the query side, unless keys are other tokens
            own = token_ids(getattr(self, name), self.n_tokens, name.replace("_", " "))
            key = own if self_attention else token_ids(getattr(self, f"key_{name}"), self.n_keys, f"key {name}")
            set_(name, own)
            set_(f"key_{name}", key)
        check_layers(self.layers, self.n_tokens, self.n_keys)

    @classmethod
    def from_scores(cls, tokens, scores, scale, mask=None, fill=DEFAULT_FILL, bias=None, **kw) -> AttentionTrace:
        """A trace from stage arrays: scores [layer, head, query, key], scale one number or [layer],
        mask [layer, query, key] (True = may attend), fill one number or [layer], bias [layer, head, query, key]."""
        return cls(tokens, records_from_scores(scores, scale, mask, fill, bias), **kw)

    @classmethod
    def from_weights(cls, tokens, weights, why: str = "only the final weights were given", **kw) -> AttentionTrace:
        """A trace of given weights [layer, head, query, key]; `why` says why there are no other stages."""
        return cls(tokens, given_layers(weights, why), **kw)

    @classmethod
    def from_attentions(cls, attentions, tokens, key_tokens=None, model: str = "", item: int = 0) -> AttentionTrace:
        """A weights-only trace from what a transformers model returns with output_attentions=True: one
        [batch, head, query, key] tensor per layer (any dtype or device, gradients or not); batch item `item`.
        SDPA's empty tuple or None raise an InputError saying what to do (see attnviz.trace.given)."""
        weights = weights_array(attentions, item)
        why = "only the final weights were given (output_attentions)"
        return cls.from_weights(tokens, weights, why, key_tokens=key_tokens, provenance=Provenance(model, "attentions"))

    # --- sizes and what the trace can give ---
    n_layer = property(lambda self: len(self.layers))
    n_head = property(lambda self: self.layers[0].shape[0])
    n_tokens = property(lambda self: len(self.tokens), doc="Query tokens (the key tokens differ in cross-attention).")
    n_keys = property(lambda self: len(self.key_tokens))
    model_name = property(lambda self: self.provenance.model)
    options = property(lambda self: self.provenance.options)
    kv_groups = property(lambda self: kv_groups(self.n_head, self.layers[0].n_kv), doc="Query heads per kv head.")
    nbytes = property(lambda self: held_bytes(t for layer in self.layers for t in layer.tensors()))
    available_stages = property(lambda self: tuple(s for s in STAGES if self.has(s)))

    def why_not(self, stage: Capability) -> str | None:
        """Why this trace cannot give `stage` (a stage name or "vectors"), as a sentence; None when it can."""
        checks.choice("stage", stage, CAPABILITIES)
        reason = next((r for r in (layer.missing(stage) for layer in self.layers) if r), None)
        what = _WHAT.get(stage, f"the {stage} stage")
        return None if reason is None else f"This trace gives no {what}: {reason}."

    def has(self, stage: Capability) -> bool:
        return self.why_not(stage) is None

    # --- the read path ---
    def stages(self, layer: int, heads=None, queries=None, keys=None, *, device: bool = False) -> Stages:
        """One layer's stages [head, query, key] as read-only float32 numpy (None for a stage it cannot give).
        heads: None (all), one head (its axis kept) or a sequence; queries / keys: (start, stop) windows chosen
        separately, None for all; every key stays in the softmax (a key window's weights come from each row's
        log-sum-exp). device=True: float32 torch tensors on the trace's device (to reduce there, move the result)."""
        record = self.layers[check_index("layer", layer, self.n_layer)]
        rows, cols = span("queries", queries, self.n_tokens), span("keys", keys, self.n_keys)
        device = checks.flag("device", device)
        with torch.inference_mode():
            out = record.stages(head_index(heads, self.n_head), rows, cols)
        return out if device else frozen_stages(out)

    def column(self, layer: int, key: int, heads=None) -> np.ndarray:
        """[head, query] float32: the weight every query gives `key` ("who reads this token"), exact, linear in tokens."""
        record = self.layers[check_index("layer", layer, self.n_layer)]
        with torch.inference_mode():
            return frozen(record.column(check_index("key", key, self.n_keys), head_index(heads, self.n_head)))

    def layer(self, layer: int) -> Stages:
        """Every head, query and key of one layer: `stages(layer)`."""
        return self.stages(layer)

    def _ipython_display_(self) -> None:  # a notebook draws a trace as the Heads page does (attnviz.notebook's view)
        NOTEBOOK_VIEW[0](self)._ipython_display_()

    def stage(self, name: Stage, layer: int | None = None) -> np.ndarray:
        """One stage by name: [head, query, key] of one layer, or [layer, head, query, key] when layer is None."""
        if not self.has(checks.choice("name", name, CAPABILITIES)) or name not in STAGES:
            raise AttnvizError(self.why_not(name) or f"{name!r} is not a stage; choose one of {', '.join(STAGES)}")
        if layer is not None:
            return getattr(self.stages(layer), name)
        return stacked([getattr(self.stages(i), name) for i in range(self.n_layer)])

    def facts(self, layer: int) -> LayerFacts:
        """What one layer's stages are made from (scale, fill, mask, bias, softcap, sinks); all None for weights."""
        return self.layers[check_index("layer", layer, self.n_layer)].facts()

    def layer_mask(self, layer: int, queries=None, keys=None) -> np.ndarray | None:
        """bool [query, key], True = may attend (None: given weights); (start, stop) windows of queries and keys."""
        s, at = self.facts(layer).structure, (span("queries", queries, self.n_tokens), span("keys", keys, self.n_keys))
        return None if s is None else frozen_mask(s.rows(*at))  # its structure is in facts(layer).structure

    def lse(self, layer: int, heads=None) -> np.ndarray:
        """float32 [head, query]: each row's log-sum-exp of the masked scores (sinks included); weight = exp(masked - lse)."""
        return frozen(self.layers[check_index("layer", layer, self.n_layer)].lse(head_index(heads, self.n_head)))

    def vectors(self, layer: int, head: int) -> tuple[np.ndarray, np.ndarray]:
        """(q [query, d_head], k [key, d_head]) of one head, key heads shared out as the model does."""
        if not self.has("vectors"):
            raise InputError(self.why_not("vectors"))
        with torch.inference_mode():
            head = check_index("head", head, self.n_head)
            q, k = self.layers[check_index("layer", layer, self.n_layer)].vectors(head_index(head, self.n_head))
        return frozen(q[0]), frozen(k[0])

    def recompute(self, layer: int, scale: float | None = None, mask=None, fill=None, heads=None) -> Stages:
        """One layer's stages [head (`heads`; None: all), query, key] with another scale, mask or fill, no forward."""
        if not self.has("scores"):
            raise AttnvizError(f"{self.why_not('scores')} There are no scores to recompute from.")
        record = self.layers[check_index("layer", layer, self.n_layer)]
        scale = None if scale is None else check_scale(scale)
        mask, fill = what_if(mask, fill, (self.n_tokens, self.n_keys))
        with torch.inference_mode():
            return frozen_stages(record.stages(head_index(heads, self.n_head), scale=scale, mask=mask, fill=fill))

    # --- whole-trace arrays (small traces); None where the trace has no such thing ---
    weights = property(lambda self: self.stage("weights"))
    scores = property(lambda self: self.stage("scores") if self.has("scores") else None)
    scaled = property(lambda self: self.stage("scaled") if self.has("scaled") else None)
    masked = property(lambda self: self.stage("masked") if self.has("masked") else None)
    mask = property(lambda self: stacked([self.layer_mask(i) for i in range(self.n_layer)]), doc="[layer, q, k] bool")
    scale = property(lambda self: _per_layer(self, "scale"), doc="[layer]: the scale each layer applied to q.k.")
    fill = property(lambda self: _per_layer(self, "fill"))
    scale_on = property(lambda self: None if not self.has("scores") else tuple(f.scale_on for f in _facts(self)))
    has_bias = property(lambda self: any(f.bias is not None for f in _facts(self)))


#: What from_scores and from_weights pass on to the trace besides its tokens and layers.
_FIELDS = (
    "key_tokens",
    "d_head",
    "provenance",
    "notes",
    "word_ids",
    "sequence_ids",
    "key_word_ids",
    "key_sequence_ids",
    "generation",
)

# Every public read checks its call against its signature first (attnviz.checks.public); the constructors from
# arrays take the trace's own fields as keywords and nothing else.
_READS = ("why_not", "stages", "column", "stage", "facts", "layer_mask", "lse", "vectors", "recompute")
for _name in _READS:
    setattr(AttentionTrace, _name, checks.public(getattr(AttentionTrace, _name), name=f"AttentionTrace.{_name}"))
for _name, _extra in (("from_scores", _FIELDS), ("from_weights", _FIELDS), ("from_attentions", ())):
    _func = getattr(AttentionTrace, _name).__func__
    setattr(AttentionTrace, _name, classmethod(checks.public(_func, name=f"AttentionTrace.{_name}", extra=_extra)))


def _facts(trace: AttentionTrace) -> list[LayerFacts]:
    return [trace.facts(i) for i in range(trace.n_layer)]


def _per_layer(trace: AttentionTrace, name: str) -> np.ndarray | None:
    return np.array([getattr(f, name) for f in _facts(trace)], np.float64) if trace.has("scores") else None
