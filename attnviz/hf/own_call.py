"""What a reader of a family's own attention code returns (`Call`), the registry entry (`Reproducer`) and the small
helpers the readers share (attnviz.hf.own, attnviz.hf.own_bert)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

import torch

from ..attention import DEFAULT_FILL
from . import capture


class Call(NamedTuple):
    """One attention call as the module computes it: q, k [batch, head, seq, head_dim], scale, allowed (bool,
    broadcasts to [batch, 1, query, key]) or None, fill, bias ([batch or 1, head or 1, query or 1, key]) or None."""

    q: torch.Tensor
    k: torch.Tensor
    scale: float
    allowed: torch.Tensor | None
    fill: float
    bias: torch.Tensor | None
    scale_on: str = "scores"  # where the model applied the scale: "scores", or "q" when it scales q before q.k


@dataclass(frozen=True)
class Reproducer:
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
        raise capture.CaptureRefused(f"a boolean mask where {family} adds an additive one")
    return capture.split_mask(mask, n)


def both(allowed: torch.Tensor | None, own: torch.Tensor, family: str) -> torch.Tensor:
    """The model's own table (causal, window) and the mask it is given, combined. A query row they hide entirely is
    refused: the model fills such a row with two different values (one per table), which no single fill reproduces.
    """
    both = own if allowed is None else allowed & own
    if bool((~both).all(-1).any()):
        raise capture.CaptureRefused(f"padding that hides every key a query may see in {family}'s own mask")
    return both


def fill_of(mask: torch.Tensor | None) -> float:
    """The value an additive mask puts in hidden cells: its dtype's min (float32 min when there is no mask)."""
    return DEFAULT_FILL if mask is None else float(torch.finfo(mask.dtype).min)
