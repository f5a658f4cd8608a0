"""The record of an ablation: what a model predicted with some heads removed, next to what it predicted with them.

`attnviz.ablate` (attnviz.hf.ablate) fills it from two forward passes over the same text; everything here is numpy
and reads only the record, so a page or a notebook can ask for the prediction change and for which later heads
changed their attention most without touching the model again.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .analysis.compare import compare_layers
from .trace import AttentionTrace
from .trace.window_cache import remembered

MODES = {"zero": "the heads' outputs set to zero", "mean": "the heads' outputs replaced by their mean over positions"}


@dataclass(frozen=True)
class TokenChange:
    """One candidate token: its probability and logit before and after the ablation."""

    id: int
    token: str
    before: float
    after: float
    logit_before: float
    logit_after: float

    @property
    def change(self) -> float:
        return self.after - self.before


@dataclass(frozen=True)
class Ablation:
    """Heads removed (`mode`: zero or mean) from one forward pass, and what changed.

    logits_before / logits_after: [vocab] float32 at `position` (the token whose successor is predicted).
    before / after: the attention of every layer without and with the ablation (layers up to the first ablated
    one are the same in both: removing a head's output changes only what later layers receive).
    """

    heads: tuple[tuple[int, int], ...]
    mode: str
    position: int
    logits_before: np.ndarray
    logits_after: np.ndarray
    target: int
    target_token: str
    top: tuple[TokenChange, ...]  # the top tokens before and after (union), the most likely before first
    before: AttentionTrace
    after: AttentionTrace

    def __post_init__(self):
        for name in ("logits_before", "logits_after"):
            arr = np.array(getattr(self, name), dtype=np.float32)
            arr.flags.writeable = False
            object.__setattr__(self, name, arr)

    probs_before = property(lambda self: softmax(self.logits_before), doc="[vocab] next-token probabilities.")
    probs_after = property(lambda self: softmax(self.logits_after))
    tokens = property(lambda self: self.before.tokens)

    @property
    def target_logit_change(self) -> float:
        """The target token's logit after minus before: how much the removed heads pushed it (negative: they
        raised it)."""
        return float(self.logits_after[self.target] - self.logits_before[self.target])

    @property
    def target_probs(self) -> tuple[float, float]:
        return float(self.probs_before[self.target]), float(self.probs_after[self.target])

    @property
    def first_changed_layer(self) -> int:
        """The first layer whose attention the ablation can change: the one after the earliest ablated layer."""
        return min(layer for layer, _ in self.heads) + 1

    def attention_change(self) -> np.ndarray:
        """[layer, head]: the Jensen-Shannon divergence (nats) of each head's weights after vs before, averaged over
        its query rows (attnviz.analysis.compare); layers before `first_changed_layer` are 0 by construction."""
        return attention_change(self.before, self.after, self.first_changed_layer)


@remembered  # the page asks on every rerun (a slider moved elsewhere): each layer's full maps, compared once
def attention_change(before: AttentionTrace, after: AttentionTrace, first_changed_layer: int) -> np.ndarray:
    out = np.zeros((before.n_layer, before.n_head))
    for layer in range(first_changed_layer, before.n_layer):
        a, b = before.stages(layer).weights, after.stages(layer).weights
        out[layer] = compare_layers(a, b, keep_diff=False).change["js"]
    return out


def softmax(logits: np.ndarray) -> np.ndarray:
    x = np.asarray(logits, np.float64)
    e = np.exp(x - x.max())
    return e / e.sum()


def top_changes(logits_before, logits_after, k: int, token_of) -> tuple[TokenChange, ...]:
    """The k most likely tokens before and the k most likely after (their union), the most likely before first."""
    p, q = softmax(logits_before), softmax(logits_after)
    ids = list(dict.fromkeys([*np.argsort(-p, kind="stable")[:k], *np.argsort(-q, kind="stable")[:k]]))
    ids.sort(key=lambda i: (-p[i], -q[i]))
    return tuple(
        TokenChange(int(i), token_of(int(i)), float(p[i]), float(q[i]), float(logits_before[i]), float(logits_after[i]))
        for i in ids
    )
