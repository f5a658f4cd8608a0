"""Models that cannot be loaded fail fast with a message that says what to do; odd families degrade clearly."""

from __future__ import annotations

import json
import shutil
import time

import huggingface_hub.constants
import numpy as np
import pytest
import torch

import attnviz
from attnviz import ModelLoadError

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat", "on", "mat", "."]


def save_tiny(folder, model_cls, config):
    from transformers import BertTokenizer

    torch.manual_seed(0)
    model_cls(config).save_pretrained(folder)
    BertTokenizer(vocab={t: i for i, t in enumerate(VOCAB)}).save_pretrained(folder)
    return str(folder)


@pytest.fixture(scope="module")
def bert_folder(tmp_path_factory):
    """A tiny BERT folder for breaking: copies of it lose or damage files."""
    from transformers import BertConfig, BertModel

    cfg = BertConfig(
        vocab_size=len(VOCAB), hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=32, max_position_embeddings=64,
    )  # fmt: skip
    return save_tiny(tmp_path_factory.mktemp("bert"), BertModel, cfg)


def says_what_to_do(msg: str) -> bool:
    """A load error points to something that works: a folder made with save_pretrained or the bundled model."""
    return "save_pretrained" in msg or "bundled" in msg


def broken_copy(src, tmp_path, name):
    dst = tmp_path / name
    shutil.copytree(src, dst)
    return dst


def expect_load_error(name, *words, within=5.0):
    t0 = time.perf_counter()
    with pytest.raises(attnviz.ModelLoadError) as info:
        attnviz.load_model(str(name))
    elapsed = time.perf_counter() - t0
    msg = str(info.value)
    assert elapsed < within, f"took {elapsed:.1f} s"
    for w in words:
        assert w in msg, msg
    return msg


def test_a_folder_without_weights_says_so(bert_folder, tmp_path):
    d = broken_copy(bert_folder, tmp_path, "noweights")
    (d / "model.safetensors").unlink()
    expect_load_error(d, "no .safetensors weights")


def test_a_corrupted_weight_file_says_so(bert_folder, tmp_path):
    d = broken_copy(bert_folder, tmp_path, "corrupt")
    (d / "model.safetensors").write_bytes(b"not a safetensors file" * 50)
    expect_load_error(d, "damaged")


def test_a_model_that_needs_remote_code_is_refused(bert_folder, tmp_path):
    d = broken_copy(bert_folder, tmp_path, "remote")
    cfg = json.loads((d / "config.json").read_text())
    cfg.update(model_type="evilcustom", auto_map={"AutoConfig": "x.Cfg", "AutoModel": "x.Model"})
    (d / "config.json").write_text(json.dumps(cfg))
    (d / "x.py").write_text("raise SystemExit('remote code ran')\n")
    expect_load_error(d, "trust_remote_code", "never runs")


def test_an_unknown_hub_id_fails_within_seconds_offline(monkeypatch):
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)  # the real path: probe the hub, find it unreachable
    expect_load_error("nobody-here/no-such-model-xyz", "cannot be reached", within=8.0)


def test_garbage_names_are_refused_before_any_network(monkeypatch):
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    for name in ("../../no/such/dir", "<script>alert(1)</script>", "a b c", "x" * 300):
        expect_load_error(name, "valid hub id", within=1.0)


def test_a_model_over_the_size_budget_is_refused(bert_folder, monkeypatch):
    monkeypatch.setenv("ATTNVIZ_MAX_MODEL_MB", "0.001")
    expect_load_error(bert_folder, "budget", "ATTNVIZ_MAX_MODEL_MB")


def test_the_size_budget_counts_the_memory_of_the_chosen_dtype(bert_folder, monkeypatch):
    from safetensors.torch import load_file

    params = sum(t.numel() for t in load_file(str(bert_folder) + "/model.safetensors").values())
    between = (params * 3) / 2**20  # MB: more than bfloat16 needs (2 bytes each), less than float32 (4)
    monkeypatch.setenv("ATTNVIZ_MAX_MODEL_MB", f"{between:.6f}")
    expect_load_error(bert_folder, "budget")  # float32 (the CPU default) does not fit
    loaded = attnviz.load_model(str(bert_folder), dtype="bfloat16")
    assert loaded.dtype == "bfloat16" and next(loaded.model.parameters()).dtype == torch.bfloat16


def test_a_bfloat16_model_gives_float32_stages_close_to_the_float32_ones(tiny_bert_dir, tiny_text):
    full = attnviz.trace(attnviz.load_model(str(tiny_bert_dir)), tiny_text)
    half = attnviz.trace(attnviz.load_model(str(tiny_bert_dir), dtype="bfloat16"), tiny_text)
    assert half.provenance.dtype == "bfloat16" and half.weights.dtype == np.float32
    np.testing.assert_allclose(half.weights, full.weights, atol=0.02)
    np.testing.assert_allclose(half.weights.sum(-1), 1, atol=1e-5)  # computed in float32 from bfloat16 q and k


@pytest.mark.parametrize(
    ("device", "dtype", "words"),
    [("cuda:7", None, "sees none" if not torch.cuda.is_available() else "cuda"), ("tpu", None, "Unknown device"),
     ("cpu", "float8", "Unknown dtype")],
)  # fmt: skip
def test_devices_and_dtypes_that_cannot_be_had_say_so(device, dtype, words):
    if torch.cuda.is_available() and device.startswith("cuda"):
        device = f"cuda:{torch.cuda.device_count() + 3}"  # a GPU index that does not exist
    with pytest.raises(attnviz.ModelLoadError) as info:
        attnviz.load_model(None, device=device, dtype=dtype)
    assert words.lower() in str(info.value).lower()


def test_hosted_mode_only_loads_allow_listed_models(bert_folder, monkeypatch):
    monkeypatch.setenv("ATTNVIZ_HOSTED", "1")
    monkeypatch.setenv("ATTNVIZ_ALLOWED_MODELS", "gpt2,bert-base-uncased")
    expect_load_error(bert_folder, "only loads these models", "gpt2")  # a server folder is never loadable
    expect_load_error("some-org/some-model", "only loads these models")
    assert attnviz.load_model().n_layer == 6  # the bundled model is always allowed


def test_the_tiny_model_itself_loads(bert_folder):
    m = attnviz.load_model(bert_folder)
    assert (m.n_layer, m.n_head, m.d_head, m.route) == (2, 2, 8, "seam")


def test_a_family_that_bypasses_the_seam_gives_a_weights_only_trace(tmp_path):
    """XLNet never calls our attention function and computes attention in code attnviz does not read (two-stream
    relative attention): fall back to eager weights and say so."""
    from transformers import XLNetConfig, XLNetModel

    cfg = XLNetConfig(vocab_size=len(VOCAB), d_model=16, n_layer=2, n_head=2, d_head=8, d_inner=32)
    m = attnviz.load_model(save_tiny(tmp_path / "xlnet", XLNetModel, cfg))
    assert m.route != "seam"
    tr = attnviz.trace(m, "the cat sat")
    assert not tr.has("scores") and tr.available_stages == ("weights",)
    assert tr.scores is None and tr.scaled is None and tr.masked is None
    assert np.allclose(tr.weights.sum(-1), 1, atol=1e-5)
    assert any("only the weights stage" in n for n in tr.notes)
    with pytest.raises(attnviz.InputError, match="cannot change its mask"):  # refused, not silently ignored
        attnviz.trace(m, "the cat sat", causal=True)
    with pytest.raises(attnviz.AttnvizError, match="weights"):
        tr.stage("scores")


# --- loading ---------------------------------------------------------------------------------------------


@pytest.fixture
def offline(monkeypatch):
    """No network here: HF_HUB_OFFLINE makes hub look-ups fail at once instead of retrying for ~30 s.

    huggingface_hub reads the variable when it is imported, so the constant is set too.
    """
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)


def _load_error(name) -> tuple[str, float]:
    start = time.perf_counter()
    with pytest.raises(ModelLoadError) as info:
        attnviz.load_model(name)
    return str(info.value), time.perf_counter() - start


def test_nonexistent_model_id_raises_model_load_error_quickly(offline):
    msg, seconds = _load_error("no-such-org/no-such-model-attnviz")
    assert seconds < 10
    assert "no-such-org/no-such-model-attnviz" in msg and says_what_to_do(msg)
    assert "Traceback" not in msg


def test_folder_without_a_model_raises_model_load_error(offline, tmp_path):
    (tmp_path / "notes.txt").write_text("not a model")
    msg, seconds = _load_error(str(tmp_path))
    assert seconds < 10
    assert "no model" in msg and "config.json" in msg and says_what_to_do(msg)


def test_mistyped_folder_path_says_it_is_not_a_folder(offline, tmp_path):
    msg, seconds = _load_error(str(tmp_path / "does-not-exist"))
    assert seconds < 10
    assert "does-not-exist" in msg and "neither an existing folder nor a valid hub id" in msg


def test_folder_with_config_but_no_safetensors_raises_model_load_error(offline, tiny_bert_dir, tmp_path):
    for name in ("config.json", "tokenizer.json", "tokenizer_config.json"):
        (tmp_path / name).write_bytes((tiny_bert_dir / name).read_bytes())
    msg, seconds = _load_error(str(tmp_path))
    assert seconds < 10
    assert "safetensors" in msg and says_what_to_do(msg)


def test_damaged_weights_raise_model_load_error(offline, tiny_bert_dir, tmp_path):
    for f in tiny_bert_dir.iterdir():
        (tmp_path / f.name).write_bytes(f.read_bytes())
    weights = tmp_path / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:100])
    msg, _ = _load_error(str(tmp_path))
    assert "damaged" in msg and says_what_to_do(msg)


@pytest.mark.parametrize("name", [None, "", "  ", "bundled"])
def test_empty_name_means_the_bundled_model(name, bundled):
    loaded = attnviz.load_model(name)
    assert loaded.name == "bundled" and loaded.label == "all-MiniLM-L6-v2 (bundled)"
    assert (loaded.n_layer, loaded.n_head) == (bundled.n_layer, bundled.n_head)
