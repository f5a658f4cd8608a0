"""The dashboard's threads (attnviz.ui.threads): one for work on a short text, the configured count for a long one."""

from __future__ import annotations

import torch
from threadpoolctl import threadpool_info, threadpool_limits

import attnviz
from attnviz import settings
from attnviz.ui import threads
from attnviz.ui.threads import ONE_THREAD_BYTES


def test_a_short_text_is_traced_on_one_thread_and_a_long_one_on_the_configured_threads(monkeypatch, bundled):
    monkeypatch.setenv("OMP_NUM_THREADS", "2")  # what settings.torch_threads() reads (the test runner sets 1)
    seen = []  # torch's threads as the model's forward pass starts
    hook = bundled.model.register_forward_pre_hook(lambda module, args: seen.append(torch.get_num_threads()))
    # the second text is 251 characters but 502 bytes: a byte-level tokenizer could make ~500 tokens of it
    texts = ["The cat sat on the mat.", "é" * (ONE_THREAD_BYTES // 2 + 1), "the cat " * ONE_THREAD_BYTES]
    try:
        torch.set_num_threads(3)  # the run's count
        for text in texts:
            with threads.for_trace(text, {}):
                attnviz.trace_pretrained(bundled, text, max_tokens=64)
            assert torch.get_num_threads() == 3  # the run's count again after each trace
        with threads.for_trace("Short.", {"pad_to": ONE_THREAD_BYTES}):  # padding counts as tokens too
            attnviz.trace_pretrained(bundled, "Short.")
        with threads.for_trace(texts[2], {"max_tokens": 64}):  # cut at 64 tokens: light
            attnviz.trace_pretrained(bundled, texts[2], max_tokens=64)
    finally:
        hook.remove()
        torch.set_num_threads(1)
    assert seen == [1, 2, 2, 2, 1] and settings.torch_threads() == 2


def test_a_run_sets_torch_and_numpy_blas_threads_from_the_sidebar_text(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    blas = lambda: {pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas"}  # noqa: E731
    try:
        threads.for_run("A short sentence.", None, 512)
        assert torch.get_num_threads() == 1 and blas() == {1}
        threads.for_run("word " * 200, "and a second sentence", 512)
        assert torch.get_num_threads() == 2 and blas() == {2}
        threads.for_run("word " * 200, None, 64)  # the token limit cuts it short
        assert torch.get_num_threads() == 1 and blas() == {1}
        with threads.for_long_work():  # a corpus profile built on the Corpus page, whatever the sidebar's text
            assert torch.get_num_threads() == 2
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(1)
        threadpool_limits(1, user_api="blas")  # the test runner's count
