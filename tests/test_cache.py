"""The trace cache stays within its byte and entry bounds and never recomputes a hit."""

import numpy as np

from attnviz.cache import BytesLRU, nbytes


def test_bounded_by_bytes_and_evicts_least_recently_used():
    cache = BytesLRU(max_bytes=3000, max_entries=10)
    calls = []

    def make(i):
        calls.append(i)
        return np.zeros(250, np.float32)  # 1000 bytes

    for i in range(3):
        cache.get_or_compute(i, lambda i=i: make(i))
    cache.get_or_compute(0, lambda: make(0))  # hit: 0 becomes most recent
    cache.get_or_compute(3, lambda: make(3))  # evicts 1, the least recently used
    assert calls == [0, 1, 2, 3]
    assert cache.bytes <= 3000 and len(cache) == 3
    cache.get_or_compute(1, lambda: make(1))
    assert calls[-1] == 1  # 1 had been evicted


def test_bounded_by_entries_and_skips_values_larger_than_the_budget():
    cache = BytesLRU(max_bytes=10_000, max_entries=2)
    for i in range(5):
        cache.get_or_compute(i, lambda: np.zeros(10, np.float32))
    assert len(cache) == 2
    big = cache.get_or_compute("big", lambda: np.zeros(100_000, np.float32))
    assert big.size == 100_000 and "big" not in cache and cache.bytes <= 10_000


def test_nbytes_counts_what_a_trace_stores(bundled):
    import attnviz

    tr = attnviz.trace(bundled, "The cat sat on the mat.")
    T, L, H, d = tr.n_tokens, tr.n_layer, tr.n_head, tr.d_head
    # q, k and v in float32 for every layer, each row's softmax normaliser (max and log-sum, [H, T] float32 each) and
    # what each head writes from each key (||v W_O||, [H, T] float32); the mask hides nothing, so its structure holds
    # no array at all
    assert nbytes(tr) == L * 3 * H * T * d * 4 + L * 2 * H * T * 4 + L * H * T * 4
    padded = attnviz.trace(bundled, "The cat sat on the mat.", pad_to=T + 3)
    assert nbytes(padded) == nbytes(tr) * (T + 3) // T + (T + 3)  # and one bool per key: padding, shared by all layers
