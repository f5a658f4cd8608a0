"""Hosted mode (ATTNVIZ_HOSTED=1): only allow-listed models, a lower token limit, and the app keeps working."""

from __future__ import annotations

from pathlib import Path

from helpers import shown
from streamlit.testing.v1 import AppTest

APP = str(Path(__file__).parents[2] / "app.py")


def run_app(**state) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=120)
    for k, v in state.items():
        at.session_state[k] = v
    return at.run()


def test_hosted_mode_refuses_a_model_outside_the_allow_list_and_stays_on_the_bundled_one(monkeypatch):
    monkeypatch.setenv("ATTNVIZ_HOSTED", "1")
    monkeypatch.setenv("ATTNVIZ_ALLOWED_MODELS", "gpt2")
    at = run_app(source="hub", model="some-org/private-model")
    assert not at.exception
    errors = shown(" ".join(e.value for e in at.error))
    assert "only loads these models: gpt2" in errors and "bundled model" in errors
    assert len(at.get("plotly_chart")) > 0  # still drawing, on the bundled model


def test_hosted_mode_lowers_the_token_limit(monkeypatch):
    monkeypatch.setenv("ATTNVIZ_HOSTED", "1")
    at = run_app(text="word " * 400)
    assert not at.exception
    warnings = shown(" ".join(w.value for w in at.warning))
    assert "kept the first 256" in warnings, warnings


def test_an_explicit_token_limit_wins(monkeypatch):
    monkeypatch.setenv("ATTNVIZ_MAX_TOKENS", "32")
    at = run_app(text="word " * 100)
    assert "kept the first 32" in shown(" ".join(w.value for w in at.warning))
