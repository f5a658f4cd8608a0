"""Every layer x head of a trace shrunk to small tiles, computed layer by layer where the trace lives.

A long text's overview never holds every layer at full size: each layer's stage is computed (on the GPU for a
GPU model), pooled to tile x tile blocks there, and only the tiles move to the host.
"""

from __future__ import annotations

import numpy as np
import torch

from ..errors import AttnvizError
from ..trace import AttentionTrace
from .values import VALUE_WEIGHTED, value_share_tensor


def block_starts(n: int, size: int) -> torch.Tensor:
    """Start of each of `size` nearly equal blocks covering 0..n."""
    return torch.linspace(0, n, size + 1).round().long()


def _block_sums(x: torch.Tensor, edges: torch.Tensor, dim: int) -> torch.Tensor:
    """Sums of x over consecutive blocks along `dim` (edges: block boundaries, first 0, last n)."""
    c = torch.nn.functional.pad(x.cumsum(dim).movedim(dim, -1), (1, 0)).movedim(-1, dim)  # running sums from 0
    return c.index_select(dim, edges[1:].to(x.device)) - c.index_select(dim, edges[:-1].to(x.device))


def pool(values: torch.Tensor, size: int, sum_keys: bool = False) -> torch.Tensor:
    """Shrink [..., Tq, Tk] to [..., size, size] blocks; NaN cells are left out of the averages.

    Scores: the mean of each block. Weights (sum_keys=True): summed over the keys of a block and averaged over
    its queries, so a pooled row is still a distribution over key blocks and a sharp diagonal stays bright.
    """
    n_q, n_k = values.shape[-2:]
    if n_q <= size and n_k <= size:
        return values
    rows, cols = block_starts(n_q, min(size, n_q)), block_starts(n_k, min(size, n_k))
    finite = torch.isfinite(values)
    all_finite = bool(finite.all())
    x = values.float() if all_finite else torch.where(finite, values.float(), 0.0)
    total = _block_sums(_block_sums(x, cols, -1), rows, -2)
    if sum_keys:
        return total / torch.diff(rows).to(total)[:, None]
    if all_finite:
        return total / (torch.diff(rows)[:, None] * torch.diff(cols)[None, :]).to(total)
    count = _block_sums(_block_sums(finite.float(), cols, -1), rows, -2)
    return torch.where(count > 0, total / count.clamp(min=1), torch.nan)


def pooled_stage(trace: AttentionTrace, stage: str, size: int) -> np.ndarray:
    """[layer, head, size, size] float32: one stage of every layer pooled; masked cells are NaN in "masked"."""
    shares = stage == VALUE_WEIGHTED  # value-weighted attention: rows that sum to 1, pooled as the weights are
    if not trace.has("values" if shares else stage):
        raise AttnvizError(trace.why_not("values" if shares else stage))
    out = []
    for i in range(trace.n_layer):
        with torch.inference_mode():  # computed and pooled where the trace lives
            values = value_share_tensor(trace, i) if shares else getattr(trace.stages(i, device=True), stage)
            if stage == "masked":
                values = values.masked_fill(~torch.as_tensor(trace.layer_mask(i), device=values.device), torch.nan)
            out.append(pool(values, size, sum_keys=stage in ("weights", VALUE_WEIGHTED)).float().cpu().numpy())
    return np.stack(out)
