"""attnviz.settings: every ATTNVIZ_* variable read in one place, with safe defaults."""

from __future__ import annotations

import torch

from attnviz import settings


def test_defaults_without_any_variable(monkeypatch):
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
