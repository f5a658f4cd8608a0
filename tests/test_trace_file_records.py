"""The trace file of format 2 keeps each layer's record, so a reopened trace reads exactly as the original does: every
stage of every layer, windows of keys (from the saved row norms), columns, values, the neuron view; q and k of
bfloat16 and float16 come back in their dtype; files of format 1 (dense stages) written before still open as
before. What the file costs against format 1's dense stages is measured by bench/trace_file.py (512 tokens: 4.9%)."""

from __future__ import annotations

import dataclasses
import io
from pathlib import Path

import numpy as np
import pytest
import torch
from helpers import vector_trace

import attnviz
from attnviz import export
from attnviz.analysis.neuron import neuron_view
from attnviz.analysis.values import value_share

DATA = Path(__file__).parent / "data"
WORDS = "the cat sat on the mat because it was tired and then it slept near the warm fire".split()


@pytest.fixture(scope="module")
def long_trace(bundled):
    """128 tokens of a pair, padded and causal: the mask kept as a band and visible keys, shared by every layer."""
    text = " ".join(WORDS[i % len(WORDS)] for i in range(100))
    return attnviz.trace(bundled, text, pair="A dog ran.", pad_to=128, causal=True, max_tokens=128)


def _same_view(a, b) -> None:
    for f in dataclasses.fields(a):
        x, y = getattr(a, f.name), getattr(b, f.name)
        assert np.array_equal(x, y) if isinstance(x, np.ndarray) else x == y, f.name


def test_a_reopened_trace_gives_every_stage_the_values_and_the_neuron_view_of_the_original(long_trace):
    tr = long_trace
    data = export.trace_npz(tr)
    dense = 4 * tr.n_layer * tr.n_head * tr.n_tokens * tr.n_keys * 4  # the float32 stages format 1 stored
    assert len(data) * 4 <= dense, (len(data), dense)
    back = export.load_npz(data)
    assert back.has("vectors") and back.has("values") and back.notes == tr.notes
    assert back.facts(0).structure.same_as(tr.facts(0).structure) and back.layers[5].mask is back.layers[0].mask
    for i in range(tr.n_layer):
        for whole, again in zip(tr.stages(i), back.stages(i)):
            assert np.array_equal(whole, again)  # bit for bit
        window = dict(heads=[2, 7], queries=(5, 40), keys=(30, 90))  # weights from the saved row norms
        assert all(map(np.array_equal, tr.stages(i, **window), back.stages(i, **window)))
        assert np.array_equal(tr.column(i, 17), back.column(i, 17)) and np.array_equal(tr.lse(i), back.lse(i))
        assert np.array_equal(tr.output_norms(i), back.output_norms(i))
        assert np.array_equal(tr.values(i, 11), back.values(i, 11))
        assert np.array_equal(value_share(tr, i), value_share(back, i))
    for layer, head, query in ((0, 0, 0), (3, 5, 64), (5, 11, 127)):
        _same_view(neuron_view(tr, layer, head, query), neuron_view(back, layer, head, query))


def test_low_precision_vectors_come_back_in_their_dtype_and_read_the_same():
    tr = vector_trace(list("abcdefg"), dtypes=(torch.bfloat16, torch.float16, torch.float32), hidden=(2, 5))
    data = export.trace_npz(tr)
    with np.load(io.BytesIO(data)) as z:
        assert z["q_0"].dtype == np.uint16 and z["q_1"].dtype == np.float16 and z["values_0"].dtype == np.uint16
    back = export.load_npz(data)
    for i, dtype in enumerate((torch.bfloat16, torch.float16, torch.float32)):
        mine, yours = back.layers[i], tr.layers[i]
        assert mine.q.dtype == mine.k.dtype == mine.values.v.dtype == dtype
        assert (
            torch.equal(mine.q, yours.q) and torch.equal(mine.k, yours.k) and torch.equal(mine.values.v, yours.values.v)
        )
        # the scores, against q.k^T in float64 of the vectors as the original holds them (keys shared out)
        k = yours.k.double().repeat_interleave(2, 0)
        want = (yours.q.double() @ k.mT).numpy()
        np.testing.assert_allclose(back.stages(i).scores, want, rtol=1e-5, atol=1e-5)
        assert all(map(np.array_equal, tr.stages(i), back.stages(i)))


@pytest.mark.parametrize("name", ["bundled", "toy", "weights"])
def test_format_1_files_written_before_still_open_as_before(name):
    """Written by the format-1 writer (attnviz at 3a961ca): reopened from their scores, scale, mask and fill, every
    stage equals the one the file holds, with no note of a difference."""
    data = (DATA / f"format1_{name}.npz").read_bytes()
    back = export.load_npz(data)
    with np.load(io.BytesIO(data)) as z:
        saved = {k: z[k] for k in z.files}
    assert not back.notes and not back.has("vectors")
    for stage in back.available_stages:
        np.testing.assert_allclose(back.stage(stage), saved[stage], rtol=0, atol=1e-6)
    if name == "bundled":
        assert np.array_equal(back.mask, saved["mask"]) and back.has("values")
        assert np.array_equal(back.output_norms(3), saved["output_norms_3"])
        assert np.array_equal(back.values(2, 4), saved["values_2"][4])
    if name == "toy":
        assert back.layers[0].softcap == 2.0 and back.layers[1].sinks is not None and back.has_bias
