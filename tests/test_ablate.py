"""attnviz.ablate against independent mechanisms: the same heads removed from an eager copy of the model by zeroing
the output projection's weight columns (zero mode) or by a hook written here (mean mode), loaded with transformers
alone; its later-layer attention against that copy's eager attention."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import attnviz

HEADS = [(0, 1), (0, 3)]
ATOL = 1e-5


def _eager_lm(folder):
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(
        str(folder), attn_implementation="eager", dtype=torch.float32, use_safetensors=True, trust_remote_code=False
    ).eval()


def _output_projection(model, layer: int):
    """GPT-2: c_proj, a Conv1D whose weight is [in, out]; Llama: o_proj, a Linear whose weight is [out, in]."""
    if hasattr(model, "transformer"):
        return model.transformer.h[layer].attn.c_proj, 0
    return model.model.layers[layer].self_attn.o_proj, 1


def _eager_forward(model, ids):
    with torch.no_grad():
        out = model(input_ids=torch.tensor([ids]), output_attentions=True, use_cache=False)
    return out.logits[0, -1].numpy(), [a[0].numpy() for a in out.attentions]


def _zeroed(folder, heads, d_head):
    """An independent copy whose heads' outputs are zero: the projection's weights that read them set to 0."""
    model = _eager_lm(folder)
    with torch.no_grad():
        for layer, head in heads:
            proj, axis = _output_projection(model, layer)
            cols = slice(head * d_head, (head + 1) * d_head)
            (proj.weight[cols] if axis == 0 else proj.weight[:, cols]).zero_()
    return model


@pytest.fixture(params=["gpt2_bpe", "llama"])
def decoder(request):
    """(loaded, folder): a causal GPT-2 with a byte-level BPE tokenizer, a grouped-query Llama (4 query heads over 2
    key/value heads) with its own tokenizer."""
    if request.param == "llama":
        return request.getfixturevalue("tiny_llama"), request.getfixturevalue("tiny_llama_dir")
    return request.getfixturevalue("gpt2_bpe"), request.getfixturevalue("gpt2_bpe_dir")


def test_zero_ablation_equals_zeroed_projection_weights_and_eager_attention(decoder, tiny_text):
    loaded, folder = decoder
    result = attnviz.ablate(loaded, tiny_text, HEADS, mode="zero")
    ids = list(result.before.provenance.input_ids)
    d_head = loaded.d_model // loaded.n_head
    logits, attentions = _eager_forward(_zeroed(folder, HEADS, d_head), ids)
    np.testing.assert_allclose(result.logits_after, logits, atol=ATOL)
    for layer in range(loaded.n_layer):  # layer 1 sees the changed input; layer 0 must not change at all
        np.testing.assert_allclose(result.after.stages(layer).weights, attentions[layer], atol=ATOL)
    plain_logits, plain_attentions = _eager_forward(_eager_lm(folder), ids)
    np.testing.assert_allclose(result.logits_before, plain_logits, atol=ATOL)  # no ablation: the model's own logits
    np.testing.assert_allclose(result.before.stages(1).weights, plain_attentions[1], atol=ATOL)
    assert not np.allclose(result.logits_after, plain_logits, atol=1e-6)  # the ablation did something
    change = result.attention_change()
    assert change.shape == (2, 4) and np.all(change[0] == 0) and np.all(change[1] > 0)


def test_mean_ablation_equals_a_mean_hook_written_here(decoder, tiny_text):
    loaded, folder = decoder
    result = attnviz.ablate(loaded, tiny_text, [(0, 2)], mode="mean")
    model, d_head = _eager_lm(folder), loaded.d_model // loaded.n_head
    proj, _ = _output_projection(model, 0)

    def mean_of_head_two(module, args):
        x = args[0].clone()
        x[:, :, 2 * d_head : 3 * d_head] = args[0][:, :, 2 * d_head : 3 * d_head].mean(dim=1, keepdim=True)
        return (x,)

    handle = proj.register_forward_pre_hook(mean_of_head_two)
    try:
        logits, attentions = _eager_forward(model, list(result.before.provenance.input_ids))
    finally:
        handle.remove()
    np.testing.assert_allclose(result.logits_after, logits, atol=ATOL)
    np.testing.assert_allclose(result.after.stages(1).weights, attentions[1], atol=ATOL)


def test_the_record_reports_the_prediction_change_and_leaves_the_model_as_it_was(tiny_gpt2, tiny_text):
    plain = attnviz.ablate(tiny_gpt2, tiny_text, [(1, 0)]).logits_before
    result = attnviz.ablate(tiny_gpt2, tiny_text, [(1, 0), (1, 1), (1, 2), (1, 3)], target="dog")
    dog = tiny_gpt2.tokenizer.convert_tokens_to_ids("dog")
    assert result.target == dog and result.target_token == "dog"
    assert result.target_logit_change == pytest.approx(float(result.logits_after[dog] - result.logits_before[dog]))
    assert result.probs_after.sum() == pytest.approx(1.0) and len(result.top) >= 10
    assert [t.before for t in result.top][:10] == sorted(result.probs_before, reverse=True)[:10]
    assert attnviz.ablate(tiny_gpt2, tiny_text, [(0, 0)], target=None).target == int(np.argmax(plain))
    with pytest.raises(attnviz.InputError, match="not one token"):
        attnviz.ablate(tiny_gpt2, tiny_text, [(0, 0)], target="the cat")
    # the hooks are gone, even after that error: the next plain forward gives the model's own logits again
    assert not any(m._forward_pre_hooks or m._forward_hooks for m in tiny_gpt2.model.modules())
    np.testing.assert_allclose(attnviz.ablate(tiny_gpt2, tiny_text, [(0, 0)]).logits_before, plain, atol=1e-6)


@pytest.mark.parametrize(
    "heads, words",
    [([(2, 0)], "Layer 2 does not exist"), ([(0, 4)], "Head 4 does not exist"), ([], "at least one head"),
     ([(0,)], "(layer, head) pair"), (5, "list of (layer, head) pairs")],
)  # fmt: skip
def test_bad_heads_and_modes_say_what_to_do(tiny_llama, tiny_text, heads, words):
    with pytest.raises(attnviz.InputError, match=words.replace("(", r"\(").replace(")", r"\)")):
        attnviz.ablate(tiny_llama, tiny_text, heads)
    with pytest.raises(attnviz.InputError, match="Unknown ablation mode"):
        attnviz.ablate(tiny_llama, tiny_text, [(0, 0)], mode="noise")


def test_models_it_cannot_ablate_say_why(bundled, tiny_xlnet_dir):
    with pytest.raises(attnviz.InputError, match="cannot predict tokens"):
        attnviz.ablate(bundled, "The cat sat on the mat.", [(0, 0)])
    with pytest.raises(attnviz.InputError, match="own code"):
        attnviz.ablate(attnviz.load_model(str(tiny_xlnet_dir)), "the cat sat", [(0, 0)])
    with pytest.raises(attnviz.InputError, match="needs a model"):
        attnviz.ablate("gpt2", "the cat sat", [(0, 0)])
