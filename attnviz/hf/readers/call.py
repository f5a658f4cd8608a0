"""What a reader of a family's own attention code returns (`Call`), the table entry (`Reader`), the one reader of
families that differ only by attribute names (`Projected`, a table row) and the small helpers the readers share."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

import torch

from ...attention import DEFAULT_FILL
from ...trace.layers import ScaleOn
from .. import capture, recorder


class Call(NamedTuple):
    """One attention call as the module computes it: q, k [batch, head, seq, head_dim], scale, allowed (bool,
    broadcasts to [batch, 1, query, key]) or None, fill, bias ([batch or 1, head or 1, query or 1, key]) or None."""

    q: torch.Tensor
    k: torch.Tensor
    scale: float
    allowed: torch.Tensor | None
    fill: float
    bias: torch.Tensor | None
    scale_on: ScaleOn = "scores"  # where the model applied the scale: "scores", or "q" when it scales q before q.k


@dataclass(frozen=True)
class Reader:
    """How one family computes attention in its own code: `read` turns a module's call arguments into a Call."""

    family: str
    read: Callable[[torch.nn.Module, dict], Call]
    returns: str = "weights"  # what its output_attentions gives: "weights", or "masked" (SqueezeBERT's masked scores)
    channels_first: bool = False  # the module reads [batch, channel, seq] (SqueezeBERT), not [batch, seq, channel]


def heads(t: torch.Tensor, n_head: int) -> torch.Tensor:
    """[batch, seq, n_head * d] -> [batch, head, seq, d]."""
    return t.view(*t.shape[:2], n_head, -1).transpose(1, 2)


def additive(mask: torch.Tensor | None, n: int, family: str) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """(allowed, extra bias) of an additive mask; a boolean one is refused (these families add theirs)."""
    if mask is not None and mask.dtype == torch.bool:
        raise recorder.CaptureRefused(f"a boolean mask where {family} adds an additive one")
    return capture.split_mask(mask, n)


def both(allowed: torch.Tensor | None, own: torch.Tensor, family: str) -> torch.Tensor:
    """The model's own table (causal, window) and the mask it is given, combined. A query row they hide entirely is
    refused: the model fills such a row with two different values (one per table), which no single fill reproduces.
    """
    both = own if allowed is None else allowed & own
    if bool((~both).all(-1).any()):
        raise recorder.CaptureRefused(f"padding that hides every key a query may see in {family}'s own mask")
    return both


def fill_of(mask: torch.Tensor | None) -> float:
    """The value an additive mask puts in hidden cells: its dtype's min (float32 min when there is no mask)."""
    return DEFAULT_FILL if mask is None else float(torch.finfo(mask.dtype).min)


@dataclass(frozen=True)
class Projected:
    """A family whose module projects q and k with two linears of the hidden states, scales by one number and adds
    the additive mask (and a position bias it is given): a row of the attribute names that hold each part. Calling
    the row reads one attention call, as the module computes it; families whose math differs have their own reader.
    """

    family: str | None = None  # named in refusals; None: the module's class name
    q: str = "query"  # the q and k projections
    k: str = "key"
    heads: str = "num_attention_heads"  # the number of heads
    head_size: str = "attention_head_size"  # the scale is 1 / sqrt(module.<head_size>)...
    scaling: str | None = None  # ...unless the module holds the factor it applies under this name
    scale_on: ScaleOn = "scores"  # where it applies the scale (Call.scale_on)
    cross: str = "encoder_hidden_states"  # the keyword of a cross-attention call: refused
    bias: str | None = None  # the keyword of a position bias the module adds to the scaled scores (MPNet)
    rotary: bool = False  # q and k turned by module.apply_rotary_position_embeddings(sinusoidal_pos) (RoFormer)

    def __call__(self, module, a: dict) -> Call:
        if a.get(self.cross) is not None:
            raise recorder.CaptureRefused("cross-attention")
        x, mask, h = a["hidden_states"], a.get("attention_mask"), getattr(module, self.heads)
        q, k = heads(getattr(module, self.q)(x), h), heads(getattr(module, self.k)(x), h)
        if self.rotary and a.get("sinusoidal_pos") is not None:
            q, k = module.apply_rotary_position_embeddings(a["sinusoidal_pos"], q, k)
        allowed, bias = additive(mask, x.shape[1], self.family or type(module).__name__)
        given = a.get(self.bias) if self.bias else None
        if given is not None:
            bias = given if bias is None else given + bias
        scale = getattr(module, self.scaling) if self.scaling else 1 / math.sqrt(getattr(module, self.head_size))
        return Call(q, k, float(scale), allowed, fill_of(mask), bias, self.scale_on)
