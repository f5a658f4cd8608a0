"""The overview's pooling read in query chunks through trace.stages: exact against numpy on the whole layer, and with
a run of a few queries per row of tiles, equal to numpy on exactly those rows."""

from __future__ import annotations

import numpy as np
import pytest

import attnviz
from attnviz.analysis.pooling import pooled_stage, row_chunks, tile_rows


@pytest.fixture(scope="module")
def padded(bundled):
    return attnviz.trace(bundled, "word and more " * 18, pad_to=64, causal=True)  # masked cells: padding and causal


def by_hand(values: np.ndarray, rows, cols, weights: bool) -> np.ndarray:
    """[head, tile, tile] from numpy: weights summed over a tile's keys and averaged over its rows; else a NaN-mean."""
    out = np.zeros((values.shape[0], len(rows), len(cols) - 1))
    for i, (a, b) in enumerate(rows):
        for j, (c, d) in enumerate(zip(cols[:-1], cols[1:])):
            block = values[:, a:b, c:d].astype(np.float64)
            out[:, i, j] = block.sum(-1).mean(-1) if weights else np.nanmean(block.reshape(len(block), -1), -1)
    return out


@pytest.mark.parametrize("stage", ["scores", "masked", "weights"])
def test_every_row_pooled_chunk_by_chunk_equals_numpy_on_the_whole_layer(padded, stage):
    got = pooled_stage(padded, stage, 5)
    cols = np.linspace(0, padded.n_keys, 6).round().astype(int)
    rows = list(zip(cols[:-1], cols[1:]))
    for layer in (0, 4):
        v = np.array(getattr(padded.stages(layer), stage), np.float64)
        if stage == "masked":
            v[:, ~padded.layer_mask(layer)] = np.nan
        np.testing.assert_allclose(got[layer], by_hand(v, rows, cols, stage == "weights"), rtol=1e-4, atol=1e-4)


def test_a_few_rows_per_tile_row_read_a_centred_run_of_each_block(padded):
    runs = tile_rows(64, 4, per_tile=6)
    assert runs == [(5, 11), (21, 27), (37, 43), (53, 59)]  # blocks of 16 rows, 6 at each centre
    assert tile_rows(64, 4, None) == [(0, 16), (16, 32), (32, 48), (48, 64)]
    got = pooled_stage(padded, "weights", 4, per_tile=6)
    w = padded.stages(2).weights
    np.testing.assert_allclose(got[2], by_hand(w, runs, [0, 16, 32, 48, 64], True), rtol=1e-5, atol=1e-6)
    assert not np.allclose(got[2], pooled_stage(padded, "weights", 4)[2], atol=1e-4)  # a sample, not every row


def test_runs_that_touch_are_read_together_up_to_a_chunk_each_row_in_its_own_tile():
    got = [(rows, tiles.tolist()) for rows, tiles in row_chunks([(0, 3), (3, 5), (7, 9)], step=4)]
    assert got == [((0, 4), [0, 0, 0, 1]), ((4, 5), [1]), ((7, 9), [2, 2])]
    assert [rows for rows, _ in row_chunks(tile_rows(15, 15, None), step=64)] == [(0, 15)]  # a short text: one read
