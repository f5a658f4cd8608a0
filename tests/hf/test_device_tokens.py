"""The token limit a device can hold: the estimate of a trace's bytes per token against real traces' nbytes."""

from __future__ import annotations

import numpy as np

import attnviz
from attnviz.hf import capacity
from attnviz.trace.reads import held_bytes


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


def test_values_are_kept_by_default_left_out_past_the_budget_and_kept_or_left_out_on_request(tiny_llama, monkeypatch):
    text = "the cat sat on the mat"
    kept = attnviz.trace(tiny_llama, text)
    assert kept.has("values") and capacity.VALUES_BUDGET == 12 * 2**30
    record = kept.layers[0]
    values = held_bytes([record.values.v, record.values.written])
    monkeypatch.setattr(capacity, "VALUES_BUDGET", capacity.trace_bytes_per_token(tiny_llama) * kept.n_tokens - 1)
    past = attnviz.trace(tiny_llama, text)  # one byte over the budget with values: left out
    assert not past.has("values") and "values=True" in past.why_not("values")
    assert past.nbytes == kept.nbytes - kept.n_layer * values  # the same record less v and what each head writes
    np.testing.assert_array_equal(past.stages(1).weights, kept.stages(1).weights)
    asked = attnviz.trace(tiny_llama, text, values=True)
    assert asked.has("values") and asked.nbytes == kept.nbytes and ("values", True) in asked.options
    monkeypatch.undo()
    off = attnviz.trace(tiny_llama, text, values=False)
    assert not off.has("values") and "values=False" in off.why_not("values") and off.nbytes == past.nbytes
