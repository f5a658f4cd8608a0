"""Hosted mode (ATTNVIZ_HOSTED=1): only allow-listed models, a lower token limit, and the app keeps working."""

from __future__ import annotations

import shutil
from pathlib import Path

from helpers import charts, shown
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
    assert len(charts(at)) > 0  # still drawing, on the bundled model


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


def fresh_copy(folder, tmp_path) -> str:
    """A folder this process has not loaded yet (st.cache_resource keeps loaded models by name)."""
    return str(shutil.copytree(folder, tmp_path / "model"))


def test_a_server_on_every_interface_is_hosted_unless_opted_out(tiny_bert_dir, tmp_path, monkeypatch):
    """The address Streamlit binds reaches the settings (attnviz.ui.setup): on 0.0.0.0 strangers may be
    watching, so server folders are refused, unless the operator opts out with ATTNVIZ_HOSTED=0."""
    from streamlit import config

    monkeypatch.delenv("ATTNVIZ_HOSTED", raising=False)
    monkeypatch.setenv("HOSTNAME", "my-laptop")
    before = config.get_option("server.address")
    assert before == "127.0.0.1"  # the committed config, read by AppTest from the working folder
    folder = fresh_copy(tiny_bert_dir, tmp_path)
    config.set_option("server.address", "0.0.0.0", "test")
    try:
        at = run_app(source="hub", model=folder)
        errors = " ".join(e.value for e in at.error)
        assert "only loads these models" in errors and folder not in errors, errors
        monkeypatch.setenv("ATTNVIZ_HOSTED", "0")
        at = run_app(source="hub", model=folder)
        assert not at.error, [e.value for e in at.error]  # opted out: the folder loads
    finally:
        config.set_option("server.address", before, "test")


def test_on_loopback_a_folder_loads_and_on_community_cloud_it_is_refused(tiny_bert_dir, tmp_path, monkeypatch):
    monkeypatch.delenv("ATTNVIZ_HOSTED", raising=False)
    monkeypatch.setenv("HOSTNAME", "streamlit")
    folder = fresh_copy(tiny_bert_dir, tmp_path)
    at = run_app(source="hub", model=folder)
    assert "only loads these models" in " ".join(e.value for e in at.error)
    monkeypatch.setenv("HOSTNAME", "my-laptop")  # the committed config binds 127.0.0.1: local mode
    at = run_app(source="hub", model=folder)
    assert not at.error, [e.value for e in at.error]
