"""Capture at transformers' attention seam equals transformers' own eager attention, model by model.

Every model is checked against independent copies loaded from the same folder: the weights against an eager
copy (to float32 rounding: the traced forward runs SDPA, so later layers' inputs differ in the last bits), the
model's outputs against an SDPA copy (the capture must not change what the model computes). Models: the bundled
all-MiniLM-L6-v2 and tiny random BERT, GPT-2 and grouped-query Llama models built by conftest.py.
"""

from __future__ import annotations

import math
import threading

import numpy as np
import pytest
import torch
from helpers import last_block

import attnviz
from attnviz.hf import bundled_model_path, trace_pretrained

BUNDLED_TEXT = "The cat sat on the mat because it was tired."
MODELS = ["bundled", "bert", "gpt2", "llama"]


@pytest.fixture(params=MODELS)
def case(request, eager_copy, tiny_text):
    """(loaded model, its independent eager copy, a text, its SDPA copy) for each model family."""
    kind = request.param
    if kind == "bundled":
        folder, loaded, text = bundled_model_path(), request.getfixturevalue("bundled"), BUNDLED_TEXT
    else:
        folder, loaded, text = (
            request.getfixturevalue(f"tiny_{kind}_dir"),
            request.getfixturevalue(f"tiny_{kind}"),
            tiny_text,
        )
    return loaded, eager_copy(folder), text, eager_copy(folder, "sdpa")


def _trace_with_output(loaded, text, **options):
    """Trace `text` and grab the model's last_hidden_state from that very forward pass (from its base model: a
    checkpoint saved with its language-model head is loaded as that class, whose output is the logits)."""
    seen = []
    base = loaded.model.base_model
    handle = base.register_forward_hook(lambda mod, args, out: seen.append(out.last_hidden_state[0].clone()))
    try:
        tr = attnviz.trace(loaded, text, **options)
    finally:
        handle.remove()
    assert len(seen) == 1
    return tr, seen[0].float().numpy()


def test_every_model_captures_all_stages(case):
    loaded, eager, _, _ = case
    assert loaded.route == "seam"
    assert loaded.n_layer == eager.config.num_hidden_layers
    assert loaded.n_head == eager.config.num_attention_heads


def test_a_trace_for_the_records_alone_ends_its_forward_after_the_last_attention_call(case):
    """The dashboard and a corpus profile read a trace's records alone (whole_forward=False): its forward stops once
    the last attention call is recorded, so the last block's feed-forward and the model's output (a language-model
    head's logits at every position) never run, and the trace is the whole forward's, bit for bit. attnviz.trace runs
    the whole forward: attnviz.ablate and a user's hooks read its output."""
    loaded, _, text, _ = case
    ran, watched = [], (last_block(loaded), loaded.model)
    hooks = [m.register_forward_hook(lambda m, *_: ran.append(m)) for m in watched]
    try:
        whole = attnviz.trace(loaded, text)
        assert ran == list(watched)
        ran.clear()
        records = trace_pretrained(loaded, text, whole_forward=False)
    finally:
        for h in hooks:
            h.remove()
    assert ran == [] and records.n_layer == whole.n_layer == loaded.n_layer
    for stage in ("scores", "weights"):
        np.testing.assert_array_equal(getattr(records, stage), getattr(whole, stage), err_msg=stage)
    for layer in range(whole.n_layer):
        np.testing.assert_array_equal(records.output_norms(layer), whole.output_norms(layer))


def test_weights_equal_eager_output_attentions(case, eager_reference):
    loaded, eager, text, sdpa = case
    tr = attnviz.trace(loaded, text)
    ref, _ = eager_reference(eager, loaded, text)
    assert tr.weights.shape == ref.shape == (loaded.n_layer, loaded.n_head, tr.n_tokens, tr.n_tokens)
    np.testing.assert_allclose(tr.weights, ref, rtol=0, atol=1e-5)


def test_tokens_are_what_the_tokenizer_produced(case):
    loaded, _, text, _ = case
    tr = attnviz.trace(loaded, text)
    ids = loaded.tokenizer(text, split_special_tokens=True)["input_ids"]
    assert list(tr.tokens) == loaded.tokenizer.convert_ids_to_tokens(ids)


def test_rows_sum_to_one(case):
    loaded, _, text, _ = case
    tr = attnviz.trace(loaded, text)
    np.testing.assert_allclose(tr.weights.sum(-1), 1.0, rtol=0, atol=1e-5)
    assert (tr.weights >= 0).all()


def test_softmax_of_masked_stage_gives_weights(case):
    loaded, _, text, _ = case
    tr = attnviz.trace(loaded, text)
    again = attnviz.softmax(torch.tensor(tr.masked)).numpy()
    np.testing.assert_allclose(again, tr.weights, rtol=0, atol=1e-6)


def test_scaled_is_scores_times_the_recorded_scale(case):
    loaded, _, text, _ = case
    tr = attnviz.trace(loaded, text)
    np.testing.assert_allclose(tr.scale, 1 / math.sqrt(loaded.d_head), rtol=1e-6)  # all four use 1/sqrt(d_head)
    for layer in range(tr.n_layer):
        expected = tr.scores[layer] * np.float32(tr.scale[layer])
        np.testing.assert_array_equal(tr.scaled[layer], expected)


def test_capture_leaves_model_outputs_unchanged(case, eager_reference):
    loaded, eager, text, sdpa = case
    _, hidden = _trace_with_output(loaded, text)
    _, ref_hidden = eager_reference(sdpa, loaded, text)
    np.testing.assert_allclose(hidden, ref_hidden, rtol=0, atol=1e-6)
    _, eager_hidden = eager_reference(eager, loaded, text)
    np.testing.assert_allclose(hidden, eager_hidden, rtol=0, atol=1e-5)


def test_padded_trace_equals_eager_with_attention_mask(case, eager_reference):
    """pad_to appends pad tokens that the model masks out exactly like transformers does."""
    loaded, eager, text, sdpa = case
    n = len(attnviz.trace(loaded, text).tokens)
    tr, hidden = _trace_with_output(loaded, text, pad_to=n + 3)
    ref, _ = eager_reference(eager, loaded, text, pad_to=n + 3)
    _, ref_hidden = eager_reference(sdpa, loaded, text, pad_to=n + 3)
    assert tr.n_tokens == n + 3
    np.testing.assert_allclose(tr.weights, ref, rtol=0, atol=1e-5)
    np.testing.assert_allclose(hidden[:n], ref_hidden[:n], rtol=0, atol=1e-6)  # padding rows are garbage anyway


def test_gpt2_weights_are_exactly_zero_above_the_diagonal(tiny_gpt2, tiny_text):
    tr = attnviz.trace(tiny_gpt2, tiny_text)
    upper = np.triu(np.ones((tr.n_tokens, tr.n_tokens), bool), k=1)
    assert (tr.weights[:, :, upper] == 0).all()
    assert (tr.weights[:, :, ~upper] > 0).all()
    assert not tr.mask[:, upper].any() and tr.mask[:, ~upper].all()


def test_llama_counts_query_heads_not_key_value_heads(tiny_llama, tiny_text):
    config = tiny_llama.model.config
    assert config.num_key_value_heads < config.num_attention_heads
    assert tiny_llama.n_head == config.num_attention_heads == 4
    assert tiny_llama.d_head == config.hidden_size // config.num_attention_heads
    tr = attnviz.trace(tiny_llama, tiny_text)
    assert tr.weights.shape[1] == tr.scores.shape[1] == 4


def test_llama_is_causal(tiny_llama, tiny_text):
    tr = attnviz.trace(tiny_llama, tiny_text)
    upper = np.triu(np.ones((tr.n_tokens, tr.n_tokens), bool), k=1)
    assert (tr.weights[:, :, upper] == 0).all()


def test_bundled_model_metadata(bundled):
    assert (bundled.n_layer, bundled.n_head, bundled.d_head, bundled.d_model) == (6, 12, 32, 384)
    assert bundled.max_tokens == 512
    assert len(bundled.attention_modules) == 6
    assert not bundled.model.training


def test_concurrent_traces_do_not_mix_experiments(tiny_bert, tiny_text):
    """Capture state is per thread (ContextVar): parallel traces with different experiments stay apart."""
    plain = attnviz.trace(tiny_bert, tiny_text)
    causal = attnviz.trace(tiny_bert, tiny_text, causal=True)
    results, errors = {}, []

    def worker(i):
        try:
            for _ in range(10):
                tr = attnviz.trace(tiny_bert, tiny_text, causal=bool(i % 2))
                results.setdefault(i, []).append(tr.weights)
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for i, all_weights in results.items():
        expected = causal.weights if i % 2 else plain.weights
        for w in all_weights:
            np.testing.assert_allclose(w, expected, rtol=0, atol=1e-6)


# --- families that bypass transformers' attention interface --------------------------------------------


def test_bypassing_families_fall_back_to_eager_weights_only(tiny_xlnet_dir, eager_copy, eager_reference, tiny_text):
    """XLNet never calls our attention function and computes attention in code attnviz does not read: it still loads
    and traces, weights only (Falcon, DeBERTa-v2 and GPT-Neo bypass the seam too, and have every stage now:
    attnviz.hf.readers read their code)."""
    folder = tiny_xlnet_dir
    loaded = attnviz.load_model(str(folder))
    assert loaded.route != "seam"
    assert (loaded.n_layer, loaded.n_head) == (2, 4)
    tr = attnviz.trace(loaded, tiny_text)
    assert not tr.has("scores") and tr.available_stages == ("weights",)
    assert tr.scores is None and tr.scaled is None and tr.masked is None
    assert any("only the weights stage" in n for n in tr.notes)
    ref, _ = eager_reference(eager_copy(folder), loaded, tiny_text)
    np.testing.assert_allclose(tr.weights, ref, rtol=0, atol=1e-6)
    with pytest.raises(attnviz.AttnvizError, match="weights"):
        tr.stage("scores")
    with pytest.raises(attnviz.AttnvizError, match="no scores"):
        tr.recompute(0)
    with pytest.raises(attnviz.InputError, match="cannot change its mask or scale"):
        attnviz.trace(loaded, tiny_text, causal=True)  # refused, never silently ignored
    with pytest.raises(attnviz.InputError, match="its own code"):
        attnviz.attention_inputs(loaded, tiny_text, 0)


def test_a_model_already_in_memory_traces_like_one_loaded_from_its_folder(tiny_llama_dir, tiny_llama, tiny_text):
    from transformers import AutoModel, AutoTokenizer

    model = AutoModel.from_pretrained(tiny_llama_dir, dtype=torch.float32)  # the user's own, default attention
    mine = attnviz.from_model(model, AutoTokenizer.from_pretrained(tiny_llama_dir), "my llama")
    assert mine.route == "seam" and mine.label == "my llama"
    ours, theirs = attnviz.trace(mine, tiny_text), attnviz.trace(tiny_llama, tiny_text)
    np.testing.assert_array_equal(ours.weights, theirs.weights)


def test_from_model_leaves_the_users_model_on_its_own_attention(tiny_llama_dir, tiny_text):
    """The user's eager model still returns its own output_attentions after from_model and a trace, and the trace's
    weights are those weights."""
    from transformers import AutoModel, AutoTokenizer

    model = AutoModel.from_pretrained(tiny_llama_dir, dtype=torch.float32, attn_implementation="eager")
    tokenizer = AutoTokenizer.from_pretrained(tiny_llama_dir)
    mine = attnviz.from_model(model, tokenizer)
    tr = attnviz.trace(mine, tiny_text)
    assert mine.route == "seam" and tr.has("scores") and model.config._attn_implementation == "eager"
    with torch.inference_mode():
        out = model(**tokenizer(tiny_text, return_tensors="pt"), output_attentions=True)
    assert len(out.attentions) == tr.n_layer
    theirs = np.stack([a[0].numpy() for a in out.attentions])
    np.testing.assert_allclose(tr.weights, theirs, rtol=0, atol=1e-6)


def test_a_loaded_model_its_user_switched_to_sdpa_still_traces_every_call(tiny_llama_dir, tiny_llama, tiny_text):
    """A notebook user who switches a loaded model's attention (to time it, or to run it fast between traces) still
    gets every layer traced, the same weights, and the model back on the implementation they chose."""
    mine = attnviz.load_model(tiny_llama_dir)
    mine.model.set_attn_implementation("sdpa")
    tr = attnviz.trace(mine, tiny_text)
    assert mine.model.config._attn_implementation == "sdpa"
    np.testing.assert_array_equal(tr.weights, attnviz.trace(tiny_llama, tiny_text).weights)


def test_a_mask_with_a_head_axis_keeps_its_values_per_head_and_one_set_of_hidden_cells():
    """Doge and Falcon (ALiBi) pass additive masks with one slice per head: the values differ by head, the hidden
    cells must not (a layer has one mask), else the capture is refused rather than showing one head's mask for all."""
    from attnviz.hf import capture, recorder

    low = torch.finfo(torch.float32).min
    values = torch.tensor([[[0.0, 1.0, low], [2.0, 3.0, low]], [[5.0, 6.0, low], [7.0, 8.0, low]]])[
        None
    ]  # [1, 2, 2, 3]
    allowed, bias = capture.split_mask(values, 3)
    assert allowed.shape == (1, 1, 2, 3) and allowed[0, 0].tolist() == [[True, True, False]] * 2
    assert bias.shape == (1, 2, 2, 3) and bias[0, 1, 1, 1].item() == 8.0 and bias[0, 0, 0, 2].item() == 0.0
    values[0, 1, 0, 1] = low  # head 1 now hides a cell head 0 shows
    with pytest.raises(recorder.CaptureRefused, match="different heads"):
        capture.split_mask(values, 3)
