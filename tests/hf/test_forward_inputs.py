"""A model gets only the inputs its forward names: a decoder saved with a BERT-style tokenizer (which emits
token_type_ids, as some hub repositories ship) gives every stage, equal to transformers' eager attention; a
weights-only fallback says its real reason."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from families import eager_attentions

import attnviz

WORDS = "the cat sat on mat a dog ran away . hello world".split()
TEXT = "the cat sat on the mat . hello world"


def bert_tokenizer():
    from transformers import BertTokenizer

    return BertTokenizer(vocab={w: i for i, w in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS])})


@pytest.fixture(scope="module")
def llama_with_bert_tokenizer(tmp_path_factory):
    from transformers import LlamaConfig, LlamaModel

    folder = tmp_path_factory.mktemp("llama-bert-tokenizer")
    tok = bert_tokenizer()
    config = LlamaConfig(vocab_size=len(tok), hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                         num_key_value_heads=2, intermediate_size=64, max_position_embeddings=64, pad_token_id=0)  # fmt: skip
    torch.manual_seed(0)
    LlamaModel(config).save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


def test_a_decoder_saved_with_a_bert_tokenizer_gives_every_stage_equal_to_eager(llama_with_bert_tokenizer):
    folder = llama_with_bert_tokenizer
    loaded = attnviz.load_model(str(folder), device="cpu")
    assert "token_type_ids" in loaded.tokenizer(TEXT)  # the premise: this tokenizer does emit them
    assert loaded.route == "seam" and not loaded.note, loaded.note
    assert loaded.inputs is not None and "token_type_ids" not in loaded.inputs
    tr = attnviz.trace(loaded, TEXT)
    assert tr.available_stages == ("scores", "scaled", "masked", "weights") and tr.has("scores")
    ids = tr.provenance.input_ids
    np.testing.assert_allclose(tr.weights, eager_attentions(folder, ids), atol=1e-5)
    padded = attnviz.trace(loaded, TEXT, pad_to=len(ids) + 3)  # padding reaches the mask as before
    ref = eager_attentions(folder, padded.provenance.input_ids, n_real=len(ids))
    np.testing.assert_allclose(padded.weights[..., : len(ids), :], ref[..., : len(ids), :], atol=1e-5)


def test_a_model_that_names_token_type_ids_still_gets_them(tiny_bert_dir):
    """BERT's forward takes token_type_ids (the second sentence's segment embedding): the filter keeps them."""
    from transformers import BertModel

    loaded = attnviz.load_model(str(tiny_bert_dir), device="cpu")
    assert "token_type_ids" in loaded.inputs
    tr = attnviz.trace(loaded, "the cat sat", pair="a dog ran away")
    enc = loaded.tokenizer("the cat sat", "a dog ran away", return_tensors="pt")
    assert enc["token_type_ids"].any()  # the premise: segment B has type 1
    ref_model = BertModel.from_pretrained(tiny_bert_dir, attn_implementation="eager").eval()
    with torch.no_grad():
        with_types = ref_model(**enc, output_attentions=True).attentions
        without = ref_model(input_ids=enc["input_ids"], output_attentions=True).attentions
    ref = np.stack([a[0].numpy() for a in with_types])
    np.testing.assert_allclose(tr.weights, ref, atol=1e-5)
    assert not np.allclose(ref, np.stack([a[0].numpy() for a in without]), atol=1e-5)  # the types matter here


def test_a_weights_only_fallback_says_its_real_reason(llama_with_bert_tokenizer):
    """A model whose own forward hands token_type_ids on to its attention: the seam refuses them, the trace is
    weights only, and the note names that argument instead of claiming the model computes attention itself."""
    from transformers import LlamaModel

    class PassesTypesOn(LlamaModel):
        def forward(self, input_ids=None, attention_mask=None, token_type_ids=None, **kwargs):
            return super().forward(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids,
                                   **kwargs)  # fmt: skip

    model = PassesTypesOn.from_pretrained(llama_with_bert_tokenizer)
    loaded = attnviz.from_model(model, bert_tokenizer(), name="custom")
    assert loaded.route != "seam" and "token_type_ids" in loaded.note
    tr = attnviz.trace(loaded, TEXT)
    assert not tr.has("scores")
    (note,) = [n for n in tr.notes if "only the weights stage" in n]
    assert "token_type_ids" in note and "its own code" not in note, note
