"""attnviz.settings: every ATTNVIZ_* variable read in one place, with safe defaults."""

from __future__ import annotations

import os

import torch

from attnviz import settings


def test_defaults_without_any_variable(monkeypatch):
    monkeypatch.setenv("HOSTNAME", "my-laptop")
    for name in ("ATTNVIZ_HOSTED", "ATTNVIZ_ALLOWED_MODELS", "ATTNVIZ_MAX_TOKENS", "ATTNVIZ_MAX_MODEL_MB",
                 "ATTNVIZ_TRACE_CACHE_MB", "ATTNVIZ_MAX_UPLOAD_MB"):  # fmt: skip
        monkeypatch.delenv(name, raising=False)
    conf = settings.current()
    assert not conf.hosted and conf.allowed_models == ()
    assert conf.max_tokens == (4096 if torch.cuda.is_available() else 512)
    assert conf.max_model_bytes == 1500 * 2**20 and conf.trace_cache_bytes == 1024 * 2**20
    assert conf.max_upload_bytes == 256 * 2**20


def test_hosted_mode_lowers_the_cpu_token_limit_and_reads_the_allow_list(monkeypatch):
    monkeypatch.setenv("ATTNVIZ_HOSTED", "yes")
    monkeypatch.setenv("ATTNVIZ_ALLOWED_MODELS", " gpt2 , ,bert-base-uncased")
    monkeypatch.delenv("ATTNVIZ_MAX_TOKENS", raising=False)
    monkeypatch.delenv("ATTNVIZ_MAX_UPLOAD_MB", raising=False)
    conf = settings.current()
    assert conf.hosted and conf.allowed_models == ("gpt2", "bert-base-uncased")
    assert conf.max_upload_bytes == 64 * 2**20  # a hosted replica unpacks less of an upload
    assert conf.max_tokens == (4096 if torch.cuda.is_available() else 256)


def test_a_typo_or_a_negative_number_falls_back_to_the_default(monkeypatch):
    monkeypatch.setenv("ATTNVIZ_MAX_MODEL_MB", "15OO")
    monkeypatch.setenv("ATTNVIZ_TRACE_CACHE_MB", "-5")
    monkeypatch.setenv("ATTNVIZ_MAX_TOKENS", "64")
    conf = settings.current()
    assert conf.max_model_bytes == 1500 * 2**20 and conf.trace_cache_bytes == 1024 * 2**20
    assert conf.max_tokens == 64


def test_hosted_mode_is_on_on_community_cloud_unless_opted_out(monkeypatch):
    monkeypatch.delenv("ATTNVIZ_HOSTED", raising=False)
    monkeypatch.setenv("HOSTNAME", "streamlit")  # what Community Cloud's containers are called
    assert settings.current().hosted
    monkeypatch.setenv("ATTNVIZ_HOSTED", "0")
    assert not settings.current().hosted
    monkeypatch.setenv("HOSTNAME", "my-laptop")
    monkeypatch.delenv("ATTNVIZ_HOSTED")
    assert not settings.current().hosted


def test_hosted_mode_is_on_when_the_server_listens_beyond_loopback_unless_opted_out(monkeypatch):
    monkeypatch.delenv("ATTNVIZ_HOSTED", raising=False)
    monkeypatch.setenv("HOSTNAME", "my-laptop")
    monkeypatch.setattr(settings, "_SERVED", {})
    assert not settings.current().hosted  # no server at all: the API in a notebook
    for address in ("127.0.0.1", "localhost", "::1", "[::1]", "127.0.0.2"):
        settings.serving_on(address)
        assert not settings.current().hosted, address
    for address in ("0.0.0.0", "::", "192.168.1.7", "", None):  # "" and None: Streamlit binds every interface
        settings.serving_on(address)
        assert settings.current().hosted, address
        monkeypatch.setenv("ATTNVIZ_HOSTED", "0")
        assert not settings.current().hosted, address
        monkeypatch.delenv("ATTNVIZ_HOSTED")


def test_torch_threads_follow_omp_num_threads_else_the_cores_at_most_four(monkeypatch):
    """A test runner's workers set OMP_NUM_THREADS=1 (tests/conftest.py): the app and the benchmarks keep it."""
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    assert settings.torch_threads() == 1
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    assert settings.torch_threads() == 3
    cores = max(1, min(4, os.cpu_count() or 1))
    for unset_or_bad in (None, "", "0", "-2", "many"):
        if unset_or_bad is None:
            monkeypatch.delenv("OMP_NUM_THREADS")
        else:
            monkeypatch.setenv("OMP_NUM_THREADS", unset_or_bad)
        assert settings.torch_threads() == cores, unset_or_bad
