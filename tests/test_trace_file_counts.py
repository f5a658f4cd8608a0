"""A trace file a few kB long may declare a million layers or heads in arrays of one token: the counts are checked
from the npy headers (format 2: the layers from the members' names) before any array is read or any layer record
built, and refused in our words naming the count and the limit, without the memory that building the records would
take (attnviz.trace.file.Limits)."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest
import torch
from helpers import make_trace, npz_members, npz_of, vector_trace

from attnviz import export
from attnviz.errors import InputError
from attnviz.trace import file as trace_file

DASHBOARD = trace_file.Limits(tokens=256, bytes=64 * 2**20, layers=128, heads=128)  # the hosted defaults


@pytest.fixture(scope="module")
def record() -> dict:
    return npz_members(export.trace_npz(make_trace(["a"], n_layer=1, n_head=1, only_weights=True)))["provenance.json"]


def declaring(record: dict, n_layer: int, n_head: int, n_token: int) -> bytes:
    """A weights-only trace file (weights of one key are all 1) declaring these counts; zeros and ones deflate ~1000:1."""
    weights = np.ones((n_layer, n_head, n_token, n_token), np.float16)
    return npz_of({"provenance.json": {**record, "tokens": ["a"] * n_token, "key_tokens": ["a"] * n_token},
                   "weights": weights})  # fmt: skip


@pytest.fixture(scope="module")
def layer_record() -> dict:
    return npz_members(export.trace_npz(vector_trace(["a"], n_head=1, n_kv=1, hidden=(), dtypes=(torch.float32,))))[
        "provenance.json"
    ]


def declaring_layers(record: dict, n_layer: int, n_head: int, n_token: int) -> bytes:
    """A format-2 file declaring these counts: layer 0's q, k and norms of one-element vectors (zeros and ones
    deflate ~1000:1), and for more layers only the last layer's q, named as it would be."""
    q, k = np.ones((n_head, n_token, 1), np.float16), np.ones((1, n_token, 1), np.float16)
    members = {"q_0": q, "k_0": k, "norms_0": np.zeros((2, n_head, n_token), np.float16)}
    if n_layer > 1:
        members[f"q_{n_layer - 1}"] = q[:1, :1]
    tokens = ["a"] * n_token
    masks = [{"ahead": None, "behind": None}]  # a file of more layers is refused before its record is read
    return npz_of({"provenance.json": {**record, "tokens": tokens, "key_tokens": tokens, "masks": masks}, **members})


def _refused_quietly(data: bytes, limits: trace_file.Limits) -> tuple[str, int]:
    """(the message, peak bytes numpy and Python allocated while refusing)."""
    tracemalloc.start()
    try:
        with pytest.raises(InputError) as e:
            trace_file.open_npz(data, limits=limits)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return str(e.value), peak


@pytest.mark.parametrize(
    "counts, words",
    [
        ((1, 100_000, 1), "100,000 heads; attnviz opens traces of up to 128 heads"),
        ((1_000_000, 1, 1), "1,000,000 layers; attnviz opens traces of up to 128 layers"),
        ((1, 1, 4_096), "4,096 queries x 4,096 keys; this dashboard opens traces of up to 256 tokens"),
    ],
)
def test_a_small_file_declaring_huge_counts_is_refused_from_its_headers(record, counts, words):
    data = declaring(record, *counts)
    assert len(data) < 64 * 2**10  # the stranger's file: a few kB
    message, peak = _refused_quietly(data, DASHBOARD)
    assert words in message
    # Unpacking the weights alone would allocate 0.2-32 MB, building the records hundreds: neither happened.
    assert peak < 1 * 2**20, f"{peak / 2**20:.1f} MB allocated while refusing"


@pytest.mark.parametrize(
    "counts, words",
    [
        ((1, 100_000, 1), "100,000 heads; attnviz opens traces of up to 128 heads"),
        ((1_000_000, 1, 1), "1,000,000 layers; attnviz opens traces of up to 128 layers"),
        ((1, 1, 4_096), "4,096 queries x 4,096 keys; this dashboard opens traces of up to 256 tokens"),
    ],
)
def test_a_small_format_2_file_declaring_huge_counts_is_refused_from_its_names_and_headers(layer_record, counts, words):
    data = declaring_layers(layer_record, *counts)
    assert len(data) < 64 * 2**10
    message, peak = _refused_quietly(data, DASHBOARD)
    assert words in message
    assert peak < 1 * 2**20, f"{peak / 2**20:.1f} MB allocated while refusing"


def test_the_python_api_has_its_own_larger_count_limits(record):
    data = declaring(record, 1_000_000, 1, 1)
    message, peak = _refused_quietly(data, trace_file.Limits())
    assert f"up to {trace_file.MAX_LAYERS:,} layers" in message and peak < 2**20
    with pytest.raises(InputError, match="1,000,000 layers"):
        export.load_npz(data)


def test_a_file_at_the_limits_opens(record):
    trace, _ = trace_file.open_npz(declaring(record, 128, 2, 3), limits=DASHBOARD)
    assert (trace.n_layer, trace.n_head, trace.n_tokens) == (128, 2, 3)
    one_more = trace_file.Limits(tokens=256, layers=128, heads=1)
    with pytest.raises(InputError, match="2 heads; attnviz opens traces of up to 1 heads"):
        trace_file.open_npz(declaring(record, 1, 2, 3), limits=one_more)


def test_a_format_2_file_at_the_limits_opens(layer_record):
    trace, _ = trace_file.open_npz(declaring_layers(layer_record, 1, 128, 256), limits=DASHBOARD)
    assert (trace.n_layer, trace.n_head, trace.n_tokens) == (1, 128, 256) and trace.has("vectors")
    with pytest.raises(InputError, match="129 heads; attnviz opens traces of up to 128 heads"):
        trace_file.open_npz(declaring_layers(layer_record, 1, 129, 3), limits=DASHBOARD)
