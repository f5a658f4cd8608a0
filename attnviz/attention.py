"""The attention math, stage by stage: what every trace, reader and our own module compute with.

Every stage keeps its own name, in code, UI and tests:

    scores  = q @ k^T                      raw dot products, before any scaling or mask
    scaled  = scores * scale               the scale the model really used (1/sqrt(d_head) by default)
    masked  = scaled where mask else fill  disallowed cells replaced by `fill`
    weights = softmax(masked)              rows sum to 1 (or to 0 on a row with every key masked by -inf)

Axis order is always [batch, head, query, key]; a mask is boolean with True = "may attend".

Why scale at all: if q and k have i.i.d. entries with mean 0 and variance 1, q.k is a sum of d
products each of variance 1, so Var(q.k) = d. Without the scale, the softmax input grows like
sqrt(d), the softmax saturates (one weight near 1, the rest near 0) and its gradients vanish.
Multiplying by 1/sqrt(d) brings the variance back to 1 (see `attnviz.analysis.scaling`).

Our from-scratch multi-head attention module, and ScoreFunction with its parameters, are in attnviz.module.
"""

from __future__ import annotations

import math
from typing import Literal, NamedTuple

import torch

from . import checks
from .errors import ArgumentError, AttnvizError

#: What masked cells become before the softmax, as Hugging Face models do it: the float32 minimum
#: (about -3.4e38). Other common choices are -10000, -1e9 and -inf; see `softmax` for fully masked rows.
DEFAULT_FILL = float(torch.finfo(torch.float32).min)


MAX_SCALE = 1e4  # scores are O(10-100); a larger multiplier only overflows float32 towards inf


def default_scale(d_head: int) -> float:
    """1/sqrt(d_head): brings Var(q.k) back to 1 when q and k have unit-variance entries."""
    return 1.0 / math.sqrt(checks.whole("d_head", d_head, low=1, high=checks.MAX_WIDTH))


def check_scale(scale: float) -> float:
    """A usable scale: finite, non-zero and small enough that scores * scale stays finite in float32."""
    return checks.number("scale", scale, nonzero=True, high=MAX_SCALE)


#: The stages, by the one name each has everywhere (code, pages, URLs, files), in the order they are computed.
Stage = Literal["scores", "scaled", "masked", "weights"]


class Stages(NamedTuple):
    """The four named stages of one attention computation, each [..., query, key]."""

    scores: torch.Tensor
    scaled: torch.Tensor
    masked: torch.Tensor
    weights: torch.Tensor


def softmax(x: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    """Softmax over the last axis that never returns NaN (written into `out` when given).

    A row whose every entry is -inf (every key masked with fill=-inf) gets all-zero weights: the query attends to
    nothing, so its output is zero (torch.softmax would give NaN). A finite fill (-10000, -1e9, dtype min) needs no
    special case: a fully masked row's softmax is uniform over all keys, which is what the model computes."""
    x = checks.array("x", x, range(1, 9), finite=False)
    weights = torch.softmax(x, dim=-1, out=out)  # the very kernel eager attention uses, so weights match it bit for bit
    # An all -inf row comes out of torch.softmax as NaN in every column, so looking at the first column (T values
    # per head, not T*T) finds every candidate; only then pay for the exact check (x.amax: a full pass) over the rows.
    if not bool(weights[..., :1].isnan().any()):
        return weights
    dead = torch.isneginf(x.amax(dim=-1, keepdim=True))
    return weights.masked_fill(dead, 0.0) if out is None else weights.masked_fill_(dead, 0.0)


def stages_from_scores(
    scores: torch.Tensor,
    scale: float,
    mask: torch.Tensor | None = None,
    fill: float = DEFAULT_FILL,
    bias=None,
    softcap: float | None = None,
    sinks: torch.Tensor | None = None,
) -> Stages:
    """scores -> scaled -> masked -> weights. The one place where the stages are defined.

    `mask` is boolean (True = may attend) and broadcasts against `scores`. Three things some models add, each
    computed as the model computes it:
    - `bias`: an additive position bias (T5's relative positions, ALiBi), part of the scaled stage;
    - `softcap`: logit softcapping (Gemma 2), scaled = softcap * tanh(scaled / softcap), before the mask;
    - `sinks`: one learned logit per head ([head], gpt-oss) or one per query ([..., head, query], computed from each
      token as Inkling 2 does) that joins the row's softmax as an extra key and is then
      dropped (gpt-oss), so a row's weights sum to less than 1: the rest went to the sink.
    """
    scores = checks.array("scores", scores, range(1, 9), finite=False)
    scale, fill = check_scale(scale), checks.number("fill", fill, minus_inf=True)
    mask = None if mask is None else as_bool_mask(checks.fits("mask", mask, scores.shape))
    softcap = checks.number("softcap", softcap, none=True, low=0, nonzero=True, high=MAX_SCALE)
    scaled, masked = masked_from_scores(scores, scale, mask, fill, bias, softcap)
    return Stages(scores, scaled, masked, _weights(masked, sinks))


def weights_from_masked(masked: torch.Tensor, sinks: torch.Tensor | None = None) -> torch.Tensor:
    """The weights stage from the masked one, as `stages_from_scores` computes it."""
    return _weights(masked, sinks)


def _weights(masked: torch.Tensor, sinks: torch.Tensor | None, out: torch.Tensor | None = None) -> torch.Tensor:
    """softmax(masked), with the sink logits (if any) as an extra key of every row that is then dropped; written into
    `out` when given."""
    if sinks is None:
        return softmax(masked, out)
    sink = sinks.reshape(-1, 1, 1) if sinks.dim() == 1 else sinks.unsqueeze(-1)  # per head / per query
    sink = sink.to(masked.dtype).expand(*masked.shape[:-1], 1)  # [..., head, query, 1]
    weights = softmax(torch.cat([masked, sink], dim=-1))[..., :-1]
    return weights if out is None else out.copy_(weights)


def weights_from_scores(
    scores, scale: float, mask=None, fill: float = DEFAULT_FILL, bias=None, softcap=None, sinks=None, out=None
) -> torch.Tensor:
    """The weights of `stages_from_scores` alone, equal to its weights bit for bit: the same operations, done in place
    on `scores`, which the caller gives up (a tensor nobody else holds; no autograd). For reads that need only the
    weights (value norms): one [..., query, key] tensor is allocated besides the scores instead of three, none when
    `out` (a float32 tensor of the scores' shape) is given to write them into."""
    return _weights(masked_in_place(scores, scale, mask, fill, bias, softcap), sinks, out)


def masked_in_place(scores, scale: float, mask=None, fill: float = DEFAULT_FILL, bias=None, softcap=None):
    """The masked stage of `masked_from_scores`, bit for bit, computed in place on `scores` (which the caller gives
    up: a tensor nobody else holds, no autograd)."""
    x = scores.mul_(scale)
    if bias is not None:
        x.add_(bias)
    if softcap is not None:
        x.div_(softcap).tanh_().mul_(softcap)
    if mask is not None and not bool(mask.all()):
        x.masked_fill_(~mask, fill)
    return x


def masked_from_scores(scores, scale: float, mask=None, fill: float = DEFAULT_FILL, bias=None, softcap=None):
    """(scaled, masked): the stages before the softmax, as `stages_from_scores` defines them (it calls this), so the
    row normalisers of a trace (attnviz.trace.row_norms) come from the very same masked scores."""
    scaled = scores * scale
    if bias is not None:
        scaled = scaled + bias
    if softcap is not None:
        scaled = torch.tanh(scaled / softcap) * softcap
    masked = scaled if mask is None or bool(mask.all()) else scaled.masked_fill(~mask, fill)
    return scaled, masked


def attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | None = None,
    scale: float | None = None,
    fill: float = DEFAULT_FILL,
) -> tuple[torch.Tensor, Stages]:
    """Scaled dot-product attention that returns the output and every stage.

    q: [..., Tq, d], k: [..., Tk, d], v: [..., Tk, dv] -> output [..., Tq, dv]."""
    q, k, v = (checks.array(name, x, range(2, 9)) for name, x in (("q", q), ("k", k), ("v", v)))
    if q.shape[-1] != k.shape[-1] or k.shape[-2] != v.shape[-2]:
        raise ArgumentError(
            "q",
            f"q [..., Tq, d], k [..., Tk, d] and v [..., Tk, dv] do not fit: {list(q.shape)}, "
            f"{list(k.shape)}, {list(v.shape)}.",
        )
    scale = default_scale(q.shape[-1]) if scale is None else check_scale(scale)
    scores = q @ k.transpose(-2, -1)  # [..., Tq, Tk]
    stages = stages_from_scores(scores, scale, mask, fill)
    return stages.weights @ v, stages


def expand_kv(kv: torch.Tensor, n_head: int, heads: torch.Tensor | None = None, dim: int = 0) -> torch.Tensor:
    """Key or value heads (axis `dim` of `kv`) shared out to query heads `heads` (None: all `n_head`), in transformers'
    repeat_kv layout: consecutive query heads share one, query head h reads kv head h // (n_head / n_kv). Grouped-
    query models keep one k and v per group; every reader that needs them per query head goes through here."""
    n_kv = kv.shape[dim]
    if n_head % n_kv:
        raise AttnvizError(f"{n_kv} key/value heads cannot be shared by {n_head} query heads.")
    if heads is None:
        if n_kv == n_head:
            return kv
        heads = torch.arange(n_head, device=kv.device)
    kv_heads = torch.div(heads.to(kv.device), n_head // n_kv, rounding_mode="floor")
    return kv[(slice(None),) * dim + (kv_heads,)]  # indexing keeps kv's memory layout (so products round alike)


# --- score functions (the general attention model; ScoreFunction in attnviz.module.scores) ----------------

SCORE_FUNCTIONS = ("dot", "scaled_dot", "general", "additive")
ADDITIVE_CHUNK = 2**24  # float32 hidden units held at once by the additive score (64 MB); longer texts go in blocks


def dot_scores(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """q [..., Tq, d], k [..., Tk, d] -> q.k for every pair, [..., Tq, Tk]."""
    return q @ k.transpose(-2, -1)


def general_scores(q: torch.Tensor, k: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """q^T W k for every pair; w [..., d_q, d_k] (one per head when it has a head axis)."""
    return q @ w @ k.transpose(-2, -1)


def additive_scores(q, k, w_q: torch.Tensor, w_k: torch.Tensor, v: torch.Tensor, chunk: int = ADDITIVE_CHUNK):
    """v^T tanh(W_q q + W_k k) for every pair; w_q [..., h, d_q], w_k [..., h, d_k], v [..., h].

    The hidden layer is [..., Tq, Tk, h]: queries are taken in blocks so at most about `chunk` of it exists.
    """
    hq = q @ w_q.transpose(-2, -1)  # [..., Tq, h]
    hk = (k @ w_k.transpose(-2, -1)).unsqueeze(-3)  # [..., 1, Tk, h]
    v = v[..., None, :, None]  # [..., 1, h, 1]: the sum over hidden units as one matrix product
    step = max(1, chunk // max(1, hk.numel()))
    out = hq.new_empty((*hq.shape[:-1], k.shape[-2]))
    for i in range(0, hq.shape[-2], step):
        hidden = hq[..., i : i + step, None, :] + hk  # [..., step, Tk, h]
        out[..., i : i + step, :] = (hidden.tanh_() @ v).squeeze(-1)  # tanh in place: autograd keeps its output
    return out


# --- masks ---------------------------------------------------------------------------------------


def causal_mask(n_query: int, n_key: int | None = None, device=None) -> torch.Tensor:
    """[Tq, Tk] boolean: query i may attend keys 0..i (aligned to the end if Tk > Tq, as with a cache); bounded."""
    n_query = checks.whole("n_query", n_query, low=0, high=checks.MAX_TOKENS)
    n_key = n_query if n_key is None else checks.whole("n_key", n_key, low=0, high=checks.MAX_TOKENS)
    checks.cells("causal_mask", n_query, n_key)
    return causal_cells(n_query, n_key, device)


def causal_cells(n_query: int, n_key: int, device=None) -> torch.Tensor:
    """causal_mask without its checks, for sizes a forward pass already holds."""
    return torch.ones(n_query, n_key, dtype=torch.bool, device=device).tril(diagonal=n_key - n_query)


def valid_length_mask(valid_lens: torch.Tensor, n_query: int, n_key: int) -> torch.Tensor:
    """Padding mask from valid lengths: [batch] or [batch, Tq] -> [batch, 1, Tq, Tk].

    Key j is visible to a query when j < valid_len; a [batch, Tq] tensor gives one length per query.
    """
    valid_lens = checks.lengths("valid_lens", valid_lens)
    n_query = checks.whole("n_query", n_query, low=0, high=checks.MAX_TOKENS)
    n_key = checks.whole("n_key", n_key, low=0, high=checks.MAX_TOKENS)
    checks.cells("valid_length_mask", valid_lens.shape[0], n_query, n_key)
    if valid_lens.dim() == 1:
        valid_lens = valid_lens[:, None].expand(-1, n_query)  # [B, Tq]
    if valid_lens.shape[-1] != n_query:
        raise ArgumentError(
            "valid_lens", f"valid_lens has {valid_lens.shape[-1]} per row, not {n_query} (one per query)."
        )
    keys = torch.arange(n_key, device=valid_lens.device)
    return (keys[None, None, :] < valid_lens[:, :, None])[:, None]  # [B, 1, Tq, Tk]


def as_bool_mask(mask: torch.Tensor) -> torch.Tensor:
    """Accept boolean masks (True = may attend) and 0/1 masks (0 = blocked)."""
    mask = torch.as_tensor(mask)
    return mask if mask.dtype == torch.bool else mask != 0


# The public functions check their call against their signature (unknown keywords, missing arguments) first.
_PUBLIC = (default_scale, softmax, stages_from_scores, attention, causal_mask, valid_length_mask)
for _f in _PUBLIC:
    globals()[_f.__name__] = checks.public(_f, name=f"attnviz.{_f.__name__}")
