"""Every layer x head of a trace shrunk to small tiles, computed layer by layer where the trace lives.

A long text's overview never holds a layer at full size: each layer's stage is read a chunk of query rows at a time
through the trace's read path (on the GPU for a GPU model), its block sums gathered there, and only the tiles move to
the host.
"""

from __future__ import annotations

import numpy as np
import torch

from ..errors import AttnvizError
from ..trace import AttentionTrace
from .values import VALUE_WEIGHTED, value_share_tensor

SHARES = ("weights", VALUE_WEIGHTED)  # rows that sum to 1: pooled tiles keep them distributions

CHUNK_CELLS = 1 << 24  # cells of one chunk of query rows (64 MB a float32 stage): the most one read computes


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


def pooled_stage(trace: AttentionTrace, stage: str, size: int, per_tile: int | None = None) -> np.ndarray:
    """[layer, head, size, size] float32: one stage of every layer pooled as `pool` pools it; masked cells are NaN in
    "masked" and left out of the means. Read a few query rows at a time through `trace.stages` (memory: one chunk of
    at most CHUNK_CELLS cells). per_tile: read at most this many query rows of each row of tiles (a centred run;
    every key of them), so time grows with the tiles drawn times the keys, not with tokens squared; None: every row."""
    need = "values" if stage == VALUE_WEIGHTED else stage  # value-weighted: rows that sum to 1, pooled as weights
    if not trace.has(need):
        raise AttnvizError(trace.why_not(need))
    return np.stack([pooled_layer(trace, i, stage, size, per_tile) for i in range(trace.n_layer)])


def tile_rows(n: int, size: int, per_tile: int | None) -> list[tuple[int, int]]:
    """The (start, stop) query rows read for each of the `size` rows of tiles over n queries: the whole block, or a
    run of at most `per_tile` rows at its centre."""
    edges = block_starts(n, min(size, n)).tolist()
    runs = []
    for a, b in zip(edges[:-1], edges[1:]):
        keep = b - a if per_tile is None else min(b - a, per_tile)
        start = a + (b - a - keep) // 2
        runs.append((start, start + keep))
    return runs


def pooled_layer(trace: AttentionTrace, layer: int, stage: str, size: int, per_tile: int | None = None) -> np.ndarray:
    """[head, size, size] float32: one layer's stage pooled (see `pooled_stage`): each chunk of query rows is summed
    over key blocks where the trace lives (a product with a 0/1 key-block matrix) and added into its rows of tiles;
    only the tiles move to the host. Runs of rows that touch are read together, so a short text is one read a
    layer, not one per row of tiles."""
    cols = block_starts(trace.n_keys, min(size, trace.n_keys))
    runs = tile_rows(trace.n_tokens, size, per_tile)
    step = max(1, CHUNK_CELLS // max(1, trace.n_head * trace.n_keys))  # query rows of one chunk
    total = count = blocks = None
    with torch.inference_mode():
        for rows, tiles in row_chunks(runs, step):
            x = _rows_of(trace, layer, stage, rows)  # [head, rows, key]
            if stage == "masked":
                x = x.masked_fill(torch.as_tensor(~trace.layer_mask(layer, queries=rows), device=x.device), torch.nan)
            if blocks is None:  # once a layer: fewer small ops
                blocks = _key_blocks(cols, x)
                total = x.new_zeros(x.shape[0], len(runs), blocks.shape[1])
                count = None if stage in SHARES else torch.zeros_like(total)
            tiles = tiles.to(x.device)
            finite = None if count is None else torch.isfinite(x)  # weights are finite by construction
            total.index_add_(1, tiles, (x if finite is None else x.where(finite, 0.0)) @ blocks)  # [head, row, block]
            if count is not None:
                count.index_add_(1, tiles, finite.to(x.dtype) @ blocks)
        if count is None:  # summed over a block's keys, averaged over its queries: rows stay distributions
            out = total / torch.tensor([b - a for a, b in runs], dtype=total.dtype, device=total.device)[:, None]
        else:
            out = torch.where(count > 0, total / count.clamp(min=1), torch.nan)
        return out.float().cpu().numpy()


def row_chunks(runs: list[tuple[int, int]], step: int):
    """((start, stop), [rows] tile of each row) for reads of at most `step` consecutive query rows covering `runs` (the
    rows of each row of tiles, in order): runs that touch share a read."""
    rows = np.concatenate([np.arange(a, b) for a, b in runs])
    tiles = np.repeat(np.arange(len(runs)), [b - a for a, b in runs])
    breaks = np.flatnonzero(np.diff(rows) != 1) + 1  # where the rows stop being consecutive
    for lo, hi in zip(np.r_[0, breaks], np.r_[breaks, len(rows)]):
        for c in range(lo, hi, step):
            d = min(hi, c + step)
            yield (int(rows[c]), int(rows[d - 1]) + 1), torch.from_numpy(tiles[c:d])


def _rows_of(trace: AttentionTrace, layer: int, stage: str, rows: tuple[int, int]) -> torch.Tensor:
    """[head, rows, key] float32 of one stage where the trace lives; the weights alone when only they are drawn."""
    if stage == VALUE_WEIGHTED:
        return value_share_tensor(trace, layer, queries=rows)
    if stage == "weights":  # no scaled or masked copies of the rows (trace.weights_tensor: the same numbers)
        return trace.weights_tensor(layer, queries=rows)
    return getattr(trace.stages(layer, queries=rows, device=True), stage)


def _key_blocks(cols: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """[key, block] 0/1 float: which block each key falls in (edges `cols`), on `like`'s device and dtype."""
    block = torch.repeat_interleave(torch.arange(len(cols) - 1), torch.diff(cols)).to(like.device)
    return torch.nn.functional.one_hot(block, len(cols) - 1).to(like.dtype)
