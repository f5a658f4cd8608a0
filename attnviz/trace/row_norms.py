"""The softmax's normaliser of every query row, per head: what makes one key's column, or a window of keys, exact
without the rest of the row.

A row's weights are softmax(masked) = exp(masked - lse) with lse = log sum_k exp(masked_k) (plus the sink's logit
where the model has one). Kept as two parts, the row's largest value and the log of the sum after subtracting it,
so a row whose every cell holds the fill (-3.4e38: a query with no visible key) still gives its exact uniform weights;
`lse` adds them. Computed from the masked scores that attnviz.attention defines, so they agree with the stages.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch

#: exp(x) is exactly 0 in float32 below this (the smallest subnormal is 1.4e-45): cells this far under a row's largest
#: value add nothing to its sum.
UNDERFLOW = -104.0


class RowNorms(NamedTuple):
    """[head, query] float32 each: the row's largest masked score (or sink logit) and log sum exp(masked - max)."""

    max: torch.Tensor
    log_sum: torch.Tensor

    @property
    def lse(self) -> torch.Tensor:
        """The log-sum-exp of every row, [head, query]."""
        return self.max + self.log_sum

    def pick(self, heads, queries=slice(None)) -> RowNorms:
        return RowNorms(self.max[heads][:, queries], self.log_sum[heads][:, queries])

    def weights(self, masked: torch.Tensor) -> torch.Tensor:
        """The weights of `masked` [head, query, key window] cells whose rows these norms describe; 0 on a row that
        holds only -inf (a query that attends to nothing, as attnviz.attention.softmax gives it)."""
        out = torch.exp(masked - self.max[..., None] - self.log_sum[..., None])
        return out.masked_fill(torch.isneginf(self.max)[..., None], 0.0)


def norms_of(masked: torch.Tensor, sinks: torch.Tensor | None = None) -> RowNorms:
    """The norms of full rows: masked [..., query, key]; sinks [..., query] (one logit per row joining the softmax)."""
    top = masked.amax(-1)
    if sinks is not None:
        top = torch.maximum(top, sinks.to(top.dtype))
    safe = top.masked_fill(torch.isneginf(top), 0.0)
    total = torch.exp(masked - safe[..., None]).sum(-1)
    if sinks is not None:
        total = total + torch.exp(sinks.to(top.dtype) - safe)
    return RowNorms(top, torch.log(total))


def with_hidden(norms: RowNorms, n_hidden: int, fill: float) -> RowNorms:
    """The norms once `n_hidden` more cells holding `fill` join every row (the keys a mask's band never reaches, left
    out of the computation): exact, and unchanged wherever those cells add an exact 0 in float32."""
    if n_hidden == 0 or fill == -math.inf:
        return norms
    top = torch.clamp(norms.max, min=fill)
    gap = fill - top
    matters = gap > UNDERFLOW
    if not bool(matters.any()):
        return norms
    total = torch.exp(norms.log_sum + (norms.max - top)) + n_hidden * torch.exp(gap)
    return RowNorms(torch.where(matters, top, norms.max), torch.where(matters, torch.log(total), norms.log_sum))


def cat(parts: list[RowNorms]) -> RowNorms:
    """Norms of consecutive query chunks joined along the query axis."""
    return RowNorms(torch.cat([p.max for p in parts], -1), torch.cat([p.log_sum for p in parts], -1))
