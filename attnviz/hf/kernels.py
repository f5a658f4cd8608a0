"""How the seam computes one attention call, and each row's softmax normaliser with it (attnviz.trace.row_norms).

- fused: the kernel torch's scaled_dot_product_attention itself runs returns every row's log-sum-exp beside the
  output, so the norms cost nothing: on the CPU its flash kernel for float attention, on a GPU its flash kernel for
  half precision (head size up to 256) or its memory-efficient one otherwise. Used where the layer's mask is exactly
  causal or hides nothing and nothing else joins the scores (no bias, softcap, sinks, experiment, dropout, batch of
  one): there the log-sum-exp over the visible keys is the one the stages define (the fill adds exact zeros).
- chunked: the stages as attnviz.attention defines them, a block of query rows at a time, for layers the model's
  kernel cannot run (experiments, softcap, sinks): output and norms from the same masked scores, and never a
  [head, query, key] array of the whole text.
Everything else runs transformers' own SDPA with the model's mask; the record then computes its norms itself.
"""

from __future__ import annotations

import torch

from ..attention import expand_kv, stages_from_scores
from ..trace.mask import StructuredMask
from ..trace.row_norms import RowNorms, cat, norms_of

CELLS = 2**22  # score cells per block of the chunked path (16 MB of float32 per intermediate)


def _cpu_kernel():
    return getattr(torch.ops.aten, "_scaled_dot_product_flash_attention_for_cpu", None)


def _cuda_kernel(query):
    """SDPA's GPU kernel that returns the log-sum-exp for `query`'s dtype and head size: (output, lse, ...) =
    kernel(query, key, value, scale)."""
    if query.dtype in (torch.float16, torch.bfloat16) and query.shape[-1] <= 256 and query.shape[-1] % 8 == 0:
        flash = torch.ops.aten._scaled_dot_product_flash_attention
        return lambda q, k, v, causal, scale: flash(q, k, v, 0.0, causal, False, scale=scale)
    efficient = torch.ops.aten._scaled_dot_product_efficient_attention
    return lambda q, k, v, causal, scale: efficient(q, k, v, None, True, 0.0, causal, scale=scale)


def fusable(structure: StructuredMask, query, value, module, dropout: float) -> bool:
    """Whether `fused` computes this call exactly (the caller checks there is no bias, softcap, sinks, experiment or
    other fill): a batch of one on the CPU or a GPU, no dropout, one head size for q, k and v (the kernels' own
    condition), a mask that is causal or hides nothing."""
    training = getattr(module, "training", False) and dropout > 0
    device = query.device.type
    return (
        not training
        and (device == "cuda" or (device == "cpu" and _cpu_kernel() is not None))
        and query.shape[0] == 1
        and value.shape[-1] == query.shape[-1]
        and structure.kind in ("all", "causal")
    )


def fused(query, key, value, scaling, causal: bool) -> tuple[torch.Tensor, RowNorms] | None:
    """(output [batch, query, head, d_v], norms of batch item 0) from one call of SDPA's own kernel; None where the
    GPU's kernel refuses this call (an old card, an odd head size): the caller then runs the model's own path."""
    key, value = (expand_kv(t, query.shape[1], dim=1) for t in (key, value))  # grouped-query attention
    if query.device.type == "cpu":
        out, lse = _cpu_kernel()(query, key, value, 0.0, causal, scale=scaling)[:2]
    else:
        try:
            out, lse = _cuda_kernel(query)(query, key, value, causal, scaling)[:2]
        except torch.OutOfMemoryError:
            raise
        except RuntimeError:  # "No available kernel" and the like: a speed path only, never a different result
            return None
    lse = lse[0, :, : query.shape[-2]].float()  # the memory-efficient kernel pads the query axis to 32
    return out.transpose(1, 2).contiguous(), RowNorms(lse, torch.zeros_like(lse))


def _rows(t: torch.Tensor | None, rows: slice, axis: int) -> torch.Tensor | None:
    """The block's rows of a tensor with a query axis at `axis` (a length-1 or missing axis broadcasts)."""
    if t is None or t.dim() < -axis or t.shape[axis] == 1:
        return t
    return t[(Ellipsis, rows) + (slice(None),) * (-axis - 1)]


def chunked(query, key, value, scale: float, allowed, fill: float, extra: dict, dropout: float, training: bool):
    """(output [batch, query, head, d_v], norms of batch item 0): the stages of a block of query rows at a time.

    allowed: bool, broadcastable to [batch, head, query, key] (or None); extra: bias, softcap, sinks ([head] or
    [batch, head, query])."""
    key, value = (expand_kv(t, query.shape[1], dim=1) for t in (key, value))  # each serves several query heads
    n_query = query.shape[-2]
    step = max(1, CELLS // (query.shape[0] * query.shape[1] * key.shape[-2]))
    outs, norms = [], []
    for a in range(0, n_query, step):
        rows = slice(a, a + step)
        sinks = extra["sinks"] if extra["sinks"] is None or extra["sinks"].dim() == 1 else extra["sinks"][..., rows]
        stages = stages_from_scores(
            query[..., rows, :] @ key.transpose(-2, -1),
            scale,
            _rows(allowed, rows, -2),
            fill,
            _rows(extra["bias"], rows, -2),
            extra["softcap"],
            sinks,
        )
        weights = torch.nn.functional.dropout(stages.weights.to(value.dtype), p=dropout, training=training)
        outs.append(weights @ value)
        norms.append(norms_of(stages.masked[0].float(), _sink_rows(sinks, stages.masked.shape[-2])))
    out = torch.cat(outs, dim=-2).transpose(1, 2).contiguous()
    return out, cat(norms)


def _sink_rows(sinks, n_rows: int) -> torch.Tensor | None:
    """Batch item 0's sink logit of every row of a block, [head, query]."""
    if sinks is None:
        return None
    if sinks.dim() == 1:
        return sinks.float()[:, None].expand(-1, n_rows)
    return sinks[0].float()
