"""The dashboard's traces: one torch thread for a short text, the configured threads for a long one."""

from __future__ import annotations

import torch

import attnviz
from attnviz import settings
from attnviz.ui.data import ONE_THREAD_BYTES, trace_threads


def test_a_short_text_is_traced_on_one_thread_and_a_long_one_on_the_configured_threads(monkeypatch, bundled):
    monkeypatch.setenv("OMP_NUM_THREADS", "2")  # what settings.torch_threads() reads (the test runner sets 1)
    seen = []  # torch's threads as the model's forward pass starts
    hook = bundled.model.register_forward_pre_hook(lambda module, args: seen.append(torch.get_num_threads()))
    texts = ["The cat sat on the mat.", "é" * (ONE_THREAD_BYTES // 2 + 1), "the cat " * ONE_THREAD_BYTES]
    try:
        for text in texts:
            with trace_threads(text, {}):
                attnviz.trace_pretrained(bundled, text, max_tokens=64)
            assert torch.get_num_threads() == settings.torch_threads() == 2  # given back after each trace
        with trace_threads("Short.", {"pad_to": ONE_THREAD_BYTES}):  # padding counts as tokens too
            attnviz.trace_pretrained(bundled, "Short.")
    finally:
        hook.remove()
        torch.set_num_threads(1)
    # the second text is 251 characters, but 502 bytes: a byte-level tokenizer could make ~500 tokens of it
    assert seen == [1, 2, 2, 2]
