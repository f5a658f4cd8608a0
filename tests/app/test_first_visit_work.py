"""What a first visit to Head statistics and Score functions computes: counted, not timed (the work is the cause)."""

from __future__ import annotations

import numpy as np
from helpers import run_page

import attnviz
from attnviz.analysis import heads as H
from attnviz.attention import SCORE_FUNCTIONS
from attnviz.module.scores import ScoreFunction
from attnviz.trace import AttentionTrace
from attnviz.ui import DEFAULT_TEXT, data


def counting(monkeypatch, owner, name: str) -> list:
    """Wrap owner.name so every call is recorded (the real function still runs)."""
    calls, real = [], getattr(owner, name)

    def spy(*args, **kwargs):
        calls.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(owner, name, spy)
    return calls


def test_head_stats_reads_each_layer_once_for_a_sentence(bundled, monkeypatch):
    tr = attnviz.trace(bundled, DEFAULT_TEXT)
    special = H.special_keys(tr, *H.special_tokens_of(bundled.tokenizer))
    calls = counting(monkeypatch, AttentionTrace, "stages")
    stats = H.head_stats(tr, special)
    assert len(calls) == tr.n_layer  # was one call per head: 72 recomputations of the stages
    monkeypatch.undo()
    for layer in (0, tr.n_layer - 1):  # every head's number from its own weights, read one head at a time
        for head in (0, tr.n_head - 1):
            w = tr.stages(layer, heads=head).weights.astype(np.float64)[0]  # [query, key]
            want = -(w * np.log(np.where(w > 0, w, 1.0))).sum(-1).mean()  # each row's entropy, averaged
            assert abs(stats["entropy"][layer, head] - want) < 1e-9


def test_a_long_text_still_reads_one_head_at_a_time():
    assert H.head_groups(12, 13 * 13) == [list(range(12))]
    assert H.head_groups(12, H.STATS_CELLS) == [[h] for h in range(12)]
    assert H.head_groups(12, H.STATS_CELLS // 5) == [[0, 1, 2, 3, 4], [5, 6, 7, 8, 9], [10, 11]]


def test_attention_inputs_stop_at_the_layer_they_read(bundled):
    ran = [0] * bundled.n_layer
    hooks = [m.register_forward_hook(lambda *a, i=i: ran.__setitem__(i, ran[i] + 1))
             for i, m in enumerate(bundled.attention_modules)]  # fmt: skip
    try:
        x, tokens, _ = attnviz.attention_inputs(bundled, DEFAULT_TEXT, 2)
    finally:
        for h in hooks:
            h.remove()
    assert ran == [1, 1] + [0] * (bundled.n_layer - 2)  # layers 2.. are not computed (the Scores page asks 4 times)
    assert x.shape == (len(tokens), bundled.d_model)


def test_head_statistics_draws_its_induction_words_once(monkeypatch):
    calls = counting(monkeypatch, H, "repeated_random_text")
    at = run_page("app_pages/headstats.py")
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert len(calls) <= 1  # cached per model (another test may have drawn them already); was once per run


def test_score_functions_traces_our_module_once_and_scores_only_the_head_shown(monkeypatch):
    traced = counting(monkeypatch, data, "trace_module")
    scored = counting(monkeypatch, ScoreFunction, "of_head")
    state = dict(source="module", m_inputs="random", m_weights="random", m_dmodel=16, m_heads=4, head=2)
    at = run_page("app_pages/scores.py", text="a text only this test traces: one two three", **state)
    assert not at.exception, [e.value for e in at.exception]
    assert len(traced) == 1  # was one trace, every head, per score function
    assert {args[1] for args in scored} == {2}  # each score function on the head shown, no other
    assert {args[0].kind for args in scored} == set(SCORE_FUNCTIONS)
