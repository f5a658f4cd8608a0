"""Bad and unusual inputs: empty or huge text, odd scripts, literal special tokens, unloadable models,
out-of-range options, and the AttentionTrace record itself (immutable, shape-checked)."""

from __future__ import annotations

import json
import time

import huggingface_hub.constants
import numpy as np
import pytest

import attnviz
from attnviz import AttnvizError, InputError, ModelLoadError

TEXT = "The cat sat on the mat."


def says_what_to_do(msg: str) -> bool:
    """A load error points to something that works: a folder made with save_pretrained or the bundled model."""
    return "save_pretrained" in msg or "bundled" in msg


# --- text -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text", ["", " ", "   \n\t  ", "\u3000"], ids=["empty", "space", "whitespace", "ideographic-space"]
)
def test_empty_or_whitespace_text_raises_input_error(bundled, text):
    with pytest.raises(InputError, match="empty") as info:
        attnviz.trace(bundled, text)
    assert "type a sentence" in str(info.value)


def test_non_string_text_raises_input_error(bundled):
    with pytest.raises(InputError):
        attnviz.trace(bundled, None)


def test_text_longer_than_the_model_limit_is_cut_with_a_note(bundled):
    text = " ".join(["word"] * 3000)
    tr = attnviz.trace(bundled, text)
    assert tr.n_tokens == bundled.max_tokens == 512
    assert tr.provenance.n_dropped == 3002 - 512  # 3000 words + [CLS] + [SEP]
    assert tr.tokens[0] == "[CLS]" and tr.tokens[-1] == "[SEP]"
    assert any("3002 tokens" in n and "512" in n for n in tr.notes)
    assert np.isfinite(tr.weights).all()


def test_max_tokens_cuts_earlier(bundled):
    tr = attnviz.trace(bundled, "one two three four five six seven eight nine ten", max_tokens=6)
    assert tr.n_tokens == 6 and tr.provenance.n_dropped == 6
    assert tr.notes


def test_short_text_has_no_note_and_drops_nothing(bundled):
    tr = attnviz.trace(bundled, TEXT)
    assert tr.provenance.n_dropped == 0 and tr.notes == ()


UNUSUAL = {
    "emoji": "I love pizza 🍕🔥😀 and 👩‍👩‍👧 families",
    "cjk": "我爱自然语言处理。日本語のテキスト、한국어 문장",
    "arabic": "القطة جلست على الحصيرة",
    "hebrew": "החתול ישב על השטיח",
    "mixed-rtl": "The word שלום means peace, مرحبا means hello",
    "zero-width": "zero\u200bwidth\u200cjoin\u200dhere\ufeff",
    "only-zero-width": "\u200b\u200b",
    "combining": "e\u0301te\u0301 cafe\u0301 Z\u0351\u0348a\u0352lgo\u0301",
    "control": "tab\there\x00nul\x07bell",
}


@pytest.mark.parametrize("text", UNUSUAL.values(), ids=UNUSUAL.keys())
def test_unusual_scripts_give_finite_traces(bundled, text):
    tr = attnviz.trace(bundled, text)
    assert tr.n_tokens >= 2
    assert np.isfinite(tr.weights).all() and np.isfinite(tr.scores).all()
    np.testing.assert_allclose(tr.weights.sum(-1), 1.0, atol=1e-5)
    assert all(isinstance(t, str) for t in tr.tokens)
    json.dumps(tr.tokens)  # tokens can be shown and serialised


@pytest.mark.parametrize("literal", ["[SEP]", "[PAD]", "[CLS]", "[MASK]"])
def test_literal_special_token_text_is_ordinary_text(bundled, literal):
    tr = attnviz.trace(bundled, f"before {literal} after")
    word = literal.strip("[]").lower()
    assert tr.tokens[0] == "[CLS]" and tr.tokens[-1] == "[SEP]"
    assert tr.tokens.count("[SEP]") == 1 and tr.tokens.count("[CLS]") == 1
    inner = list(tr.tokens[1:-1])
    assert literal not in inner
    start, stop = inner.index("["), inner.index("]")
    assert "".join(t.removeprefix("##") for t in inner[start + 1 : stop]) == word  # e.g. [ sep ] or [ cl ##s ]


def test_literal_sep_is_split_into_bracket_sep_bracket(bundled):
    tr = attnviz.trace(bundled, "one [SEP] two")
    assert tr.tokens == ("[CLS]", "one", "[", "sep", "]", "two", "[SEP]")


def test_pair_adds_a_second_segment_and_blank_pair_is_ignored(bundled):
    single = attnviz.trace(bundled, TEXT)
    pair = attnviz.trace(bundled, TEXT, pair="It was tired.")
    assert pair.tokens.count("[SEP]") == 2 and pair.n_tokens > single.n_tokens
    blank = attnviz.trace(bundled, TEXT, pair="   ")
    assert blank.tokens == single.tokens


# --- options --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("hide", [[99], [-1], [0, 9]])
def test_hide_out_of_range_raises_input_error(bundled, hide):
    with pytest.raises(InputError, match=r"0\.\.8"):  # [CLS] the cat sat on the mat . [SEP]: 9 tokens
        attnviz.trace(bundled, TEXT, hide=hide)


@pytest.mark.parametrize("layers", [[6], [-1], [0, 10]])
def test_layers_out_of_range_raise_input_error(bundled, layers):
    with pytest.raises(InputError, match=r"0\.\.5"):
        attnviz.trace(bundled, TEXT, layers=layers)


@pytest.mark.parametrize("scale", [float("nan"), float("inf")])
def test_non_finite_scale_raises_input_error(bundled, scale):
    with pytest.raises(InputError, match="finite"):
        attnviz.trace(bundled, TEXT, scale=scale)


def test_attention_inputs_rejects_a_missing_layer(bundled):
    with pytest.raises(InputError, match=r"0\.\.5"):
        attnviz.attention_inputs(bundled, TEXT, 6)


def test_trace_rejects_something_that_is_not_a_model():
    with pytest.raises(AttnvizError, match="load_model"):
        attnviz.trace("bert-base-uncased", TEXT)


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
