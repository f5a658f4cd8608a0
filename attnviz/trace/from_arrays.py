"""Layers made from arrays rather than from a model: recorded layers from stage arrays (scores, scale, mask, fill,
bias) and layers of given weights (what `AttentionTrace.from_scores` and `from_weights` build)."""

from __future__ import annotations

import numbers

import torch

from .. import checks
from ..attention import DEFAULT_FILL, check_scale
from ..errors import ArgumentError
from .layers import GivenWeights, LayerRecord


def records_from_scores(scores, scale, mask=None, fill=None, bias=None) -> tuple[LayerRecord, ...]:
    """Recorded layers from stage arrays: scores [layer, head, query, key], scale one number or [layer], mask
    [layer, query, key] (True = may attend; None: all), fill one number or [layer], bias [layer, head, query, key]."""
    scores = checks.array("scores", scores, (4,)).to(torch.float32)
    if 0 in scores.shape:
        raise ArgumentError(
            "scores", f"scores needs a layer, a head, a query and a key at least; got {tuple(scores.shape)}."
        )
    n_layer = scores.shape[0]
    masks = torch.ones(n_layer, *scores.shape[2:], dtype=torch.bool) if mask is None else mask
    masks = checks.array("mask", masks, (3,), finite=False) != 0
    biases = [None] * n_layer if bias is None else checks.array("bias", bias, (4,)).to(torch.float32)
    for name, given in (("mask", masks), ("bias", biases)):
        if len(given) != n_layer:
            raise ArgumentError(name, f"{name} has {len(given)} layers; scores has {n_layer}.")
    why = "it was made from stage arrays, which hold no value vectors"
    return tuple(
        LayerRecord(None, None, check_scale(s), m, checks.number("fill", f, minus_inf=True), b, x, no_values=why)
        for x, s, m, f, b in zip(
            scores.clone(),
            _per_layer("scale", scale, n_layer),
            masks,
            _per_layer("fill", DEFAULT_FILL if fill is None else fill, n_layer),
            biases,
        )
    )


def _per_layer(name: str, value, n_layer: int) -> list[float]:
    """One number, or one per layer."""
    if isinstance(value, numbers.Number):
        return [checks.number(name, value, minus_inf=name == "fill")] * n_layer
    a = checks.array(name, value, (0, 1), finite=False).double().reshape(-1)
    if len(a) not in (1, n_layer):
        raise ArgumentError(name, f"{name} must be one number or one per layer ({n_layer}); got {len(a)}.")
    return a.expand(n_layer).tolist()


def given_layers(weights, why: str) -> tuple[GivenWeights, ...]:
    """Layers of given weights [layer, head, query, key]; `why` says why there are no other stages."""
    w = checks.array("weights", weights, (4,)).detach().to("cpu", torch.float32).numpy().copy()  # nobody else holds it
    checks.text("why", why)
    return tuple(GivenWeights(torch.from_numpy(a.copy()), why) for a in w)
