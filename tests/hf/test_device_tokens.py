"""The token limit a device can hold: the estimate of a trace's bytes per token against real traces' nbytes."""

from __future__ import annotations

import attnviz
from attnviz.hf import capacity


def _nbytes(loaded, n: int) -> tuple[int, int]:
    tr = attnviz.trace(loaded, " ".join(["cat"] * n))
    return tr.n_tokens, tr.nbytes


def test_bytes_per_token_is_what_a_real_trace_holds_per_token(bundled, tiny_llama):
    for loaded in (bundled, tiny_llama):  # 12 heads x 32 (BERT); grouped key/value heads (Llama)
        (n1, b1), (n2, b2) = _nbytes(loaded, 8), _nbytes(loaded, 40)
        per_token = capacity.trace_bytes_per_token(loaded)
        assert per_token * (n2 - n1) == b2 - b1, (loaded.label, per_token, (b2 - b1) / (n2 - n1))  # the growth, exact
        assert abs(b2 - per_token * n2) <= 0.05 * b2  # and nearly all of it (the mask's structure is the rest)


def test_device_tokens_divides_the_budget_by_the_bytes_per_token(bundled):
    per_token = capacity.trace_bytes_per_token(bundled)
    assert capacity.device_tokens(bundled, budget=per_token * 1000 + 1) == (1000, per_token * 1000 + 1)
    tokens, budget = capacity.device_tokens(bundled)
    assert 0 < budget <= capacity.free_bytes("cpu") and tokens == budget // per_token
