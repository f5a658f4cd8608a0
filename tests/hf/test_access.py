"""What may be loaded: the size budget on every load (hub, hub cache offline, folder), failing closed when a size
cannot be read; every load failure logged in one line; hosted messages that name no path on the server."""

from __future__ import annotations

import http.server
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import huggingface_hub.constants
import pytest

import attnviz

ROOT = Path(__file__).resolve().parents[2]
REPO = "some-org/tiny-bert"


@pytest.fixture
def hub_cache(tmp_path, monkeypatch):
    """An offline machine with its own hub cache (huggingface_hub and transformers both read the constant)."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    return tmp_path / "hub"


def cache(model_dir: Path, hub: Path, repo: str = REPO) -> Path:
    """`model_dir` as the hub cache holds a download of `repo`: refs/main names a snapshot with its files."""
    sha = "0123456789abcdef0123456789abcdef01234567"
    entry = hub / f"models--{repo.replace('/', '--')}"
    (entry / "refs").mkdir(parents=True)
    (entry / "refs" / "main").write_text(sha)
    snapshot = entry / "snapshots" / sha
    shutil.copytree(model_dir, snapshot)
    return snapshot


def load_error(name) -> str:
    with pytest.raises(attnviz.ModelLoadError) as info:
        attnviz.load_model(name, device="cpu")
    return str(info.value)


def test_the_budget_applies_to_a_cached_hub_model_offline(tiny_bert_dir, hub_cache, monkeypatch):
    cache(tiny_bert_dir, hub_cache)
    assert attnviz.load_model(REPO, device="cpu").n_layer == 2  # the cache is real: within budget it loads
    monkeypatch.setenv("ATTNVIZ_MAX_MODEL_MB", "0.01")
    msg = load_error(REPO)
    assert "over this dashboard's budget" in msg and "ATTNVIZ_MAX_MODEL_MB" in msg, msg


def test_a_cached_model_whose_size_cannot_be_read_is_refused(tiny_bert_dir, hub_cache):
    snapshot = cache(tiny_bert_dir, hub_cache)
    weights = snapshot / "model.safetensors"
    weights.write_bytes((2**40).to_bytes(8, "little") + weights.read_bytes()[8:])  # a header length past the file
    msg = load_error(REPO)
    assert "size cannot be checked" in msg and "budget" in msg, msg


class Failing(http.server.BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 - the name http.server calls
        self.send_response(503)
        self.end_headers()

    do_HEAD = do_GET

    def log_message(self, *args):
        pass


def test_a_hub_that_does_not_say_the_size_gets_the_model_refused(monkeypatch):
    """Online (a hub endpoint that answers, with errors): no size, no load. It used to go ahead unchecked."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Failing)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    endpoint = f"http://127.0.0.1:{server.server_address[1]}"
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setenv("HF_ENDPOINT", endpoint)
    monkeypatch.setattr(huggingface_hub.constants, "ENDPOINT", endpoint)
    try:
        msg = load_error(REPO)
    finally:
        server.shutdown()
    assert "did not say how large its weights are" in msg and "budget cannot be checked" in msg, msg


def test_a_load_failure_is_logged_in_one_line_on_stderr(tmp_path):
    """With no logging set up (as under `streamlit run`), the operator still sees why a model failed."""
    folder = tmp_path / "damaged"
    folder.mkdir()
    (folder / "config.json").write_text('{"model_type": "bert"}')
    (folder / "model.safetensors").write_bytes(b"not a safetensors file" * 50)
    code = f"import attnviz\ntry:\n    attnviz.load_model({str(folder)!r})\nexcept attnviz.ModelLoadError:\n    pass\n"
    env = dict(os.environ, HF_HUB_OFFLINE="1", PYTHONPATH=str(ROOT))
    err = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stderr
    lines = [ln for ln in err.splitlines() if "attnviz" in ln]
    assert len(lines) == 1, err[-2000:]
    assert lines[0].startswith(f"attnviz: could not load model {str(folder)!r}:") and "damaged" in lines[0], lines


def test_hosted_load_errors_name_no_path_on_the_server(tiny_bert_dir, hub_cache, monkeypatch):
    snapshot = cache(tiny_bert_dir, hub_cache)
    config = snapshot / "config.json"
    config.write_text(config.read_text().replace('"hidden_size": 32', '"hidden_size": 64'))  # weights do not fit
    monkeypatch.setenv("ATTNVIZ_HOSTED", "1")
    monkeypatch.setenv("ATTNVIZ_ALLOWED_MODELS", REPO)
    names = [REPO, str(tiny_bert_dir), "/etc/passwd", "/no/such/folder", "../..", "~/.cache/huggingface"]
    messages = [load_error(name) for name in names]
    server = [str(hub_cache), str(tiny_bert_dir), os.getcwd(), str(ROOT), os.path.expanduser("~"), "/etc/", "/no/"]
    for msg in messages:
        assert not [s for s in server if s in msg], msg
    assert "RuntimeError" in messages[0], messages[0]  # the allow-listed model still says why it failed
    # a folder is refused the same way whether it exists or not (no probing the server's disk)
    assert messages[1] == messages[3] and all("only loads" in m for m in messages[1:])


def test_paths_are_taken_out_of_a_message_and_nothing_else():
    from attnviz.hf.failures import without_paths

    text = ("It looks like the config file at '/srv/app/.cache/hub/config.json' is not valid; see "
            "https://huggingface.co/docs/x/y or 'google-bert/bert-base-uncased', C:\\Users\\me\\m, ~/models/m, 1/sqrt(d).")  # fmt: skip
    assert without_paths(text) == (
        "It looks like the config file at '<path>' is not valid; see https://huggingface.co/docs/x/y or "
        "'google-bert/bert-base-uncased', <path>, <path>, 1/sqrt(d)."
    )


def test_local_errors_do_not_name_the_working_folder(monkeypatch):
    monkeypatch.delenv("ATTNVIZ_HOSTED", raising=False)
    msg = load_error("./no-such-folder/model")
    assert "no-such-folder" in msg and os.getcwd() not in msg and "No folder exists there" in msg, msg
