"""Language-model heads at load: a checkpoint saved with its head is loaded as that class and predicts tokens; a base
checkpoint (the bundled model) says in words that it cannot."""

from __future__ import annotations

import json

import pytest
import torch

import attnviz
from attnviz.hf.encode import encode
from attnviz.hf.lm import next_token_logits


def _independent(folder, cls_name: str):
    import transformers

    cls = getattr(transformers, cls_name)
    return cls.from_pretrained(str(folder), dtype=torch.float32, use_safetensors=True, trust_remote_code=False).eval()


@pytest.mark.parametrize("which, cls_name", [("gpt2", "GPT2LMHeadModel"), ("llama", "LlamaForCausalLM")])
def test_a_decoder_saved_with_its_head_predicts_the_next_token_as_transformers_does(
    which, cls_name, request, tiny_text
):
    loaded = request.getfixturevalue(f"tiny_{which}")
    assert type(loaded.model).__name__ == cls_name and loaded.has_lm_head and loaded.lm_head == "causal"
    enc = encode(loaded.tokenizer, tiny_text, limit=loaded.max_tokens)
    ours = next_token_logits(loaded, enc.inputs)
    ref = _independent(request.getfixturevalue(f"tiny_{which}_dir"), cls_name)
    with torch.no_grad():
        theirs = ref(input_ids=enc.inputs["input_ids"]).logits[0, -1]
    torch.testing.assert_close(ours, theirs, atol=1e-5, rtol=1e-5)
    padded = encode(loaded.tokenizer, tiny_text, limit=loaded.max_tokens, pad_to=len(enc.ids) + 3)
    torch.testing.assert_close(next_token_logits(loaded, padded.inputs), theirs, atol=1e-5, rtol=1e-5)


def test_the_bundled_model_says_it_cannot_predict_tokens(bundled):
    assert not bundled.has_lm_head and type(bundled.model).__name__ == "BertModel"
    assert "cannot predict tokens" in bundled.lm_note and "BertModel" in bundled.lm_note
    enc = encode(bundled.tokenizer, "the cat sat", limit=bundled.max_tokens)
    with pytest.raises(attnviz.InputError, match="cannot predict tokens"):
        next_token_logits(bundled, enc.inputs)


def test_a_masked_lm_predicts_at_its_mask_and_traces_inside_its_head(tmp_path, tiny_bert_dir, tiny_text):
    from transformers import BertForMaskedLM

    torch.manual_seed(5)
    model = BertForMaskedLM.from_pretrained(str(tiny_bert_dir), use_safetensors=True).eval()
    model.save_pretrained(tmp_path)
    from transformers import AutoTokenizer

    AutoTokenizer.from_pretrained(str(tiny_bert_dir)).save_pretrained(tmp_path)
    loaded = attnviz.load_model(str(tmp_path))
    assert loaded.lm_head == "masked" and loaded.route == "seam" and loaded.n_layer == 2
    trace = attnviz.trace(loaded, tiny_text)  # the attention modules are found inside the head class
    assert trace.stages(1).weights.shape[0] == 4
    enc = encode(loaded.tokenizer, tiny_text, limit=loaded.max_tokens)
    with pytest.raises(attnviz.InputError, match="no mask token"):
        next_token_logits(loaded, enc.inputs)
    ids = enc.inputs["input_ids"].clone()
    ids[0, 3] = loaded.tokenizer.mask_token_id
    ours = next_token_logits(loaded, dict(enc.inputs, input_ids=ids))
    with torch.no_grad():
        theirs = model(input_ids=ids, attention_mask=enc.inputs["attention_mask"]).logits[0, 3]
    torch.testing.assert_close(ours, theirs, atol=1e-5, rtol=1e-5)


def test_a_head_class_without_head_weights_is_not_taken_for_a_trained_head(tmp_path, tiny_llama_dir):
    """A base checkpoint whose config names a head class: transformers would fill the head at random."""
    from transformers import AutoModel, AutoTokenizer

    base = AutoModel.from_pretrained(str(tiny_llama_dir), use_safetensors=True)
    base.save_pretrained(tmp_path)  # save_pretrained writes the class saved (LlamaModel): name the head by hand
    config = tmp_path / "config.json"
    config.write_text(json.dumps(json.loads(config.read_text()) | {"architectures": ["LlamaForCausalLM"]}))
    AutoTokenizer.from_pretrained(str(tiny_llama_dir)).save_pretrained(tmp_path)
    loaded = attnviz.load_model(str(tmp_path))
    assert not loaded.has_lm_head and "no weights for the head" in loaded.lm_note
    assert attnviz.trace(loaded, "the cat sat").stages(0).weights.shape[0] == 4  # traced inside the head class


def test_from_model_says_whether_the_model_has_a_head(tiny_gpt2_dir):
    from transformers import AutoModel, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(tiny_gpt2_dir))
    head = _independent(tiny_gpt2_dir, "GPT2LMHeadModel")
    assert attnviz.from_model(head, tok).lm_head == "causal"
    base = AutoModel.from_pretrained(str(tiny_gpt2_dir), use_safetensors=True)
    assert not attnviz.from_model(base, tok).has_lm_head
