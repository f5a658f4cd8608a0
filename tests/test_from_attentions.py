"""AttentionTrace.from_attentions takes what transformers returns, as it returns it.

The transformers models here are the real ones (a tiny random BERT loaded with transformers' own eager or SDPA
attention); the reference for every value is transformers' own attention tensor, read back with plain torch.
For "any device" this CPU-only machine has no second real device (the meta device holds no values), so the
device path is exercised with a tensor subclass that wraps every torch op (as device-backed wrappers do) and
records them: from_attentions must move it to the host as a plain tensor, never call numpy() on the wrapper.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

import attnviz
from attnviz import AttentionTrace


def _run(model, folder, text, grad: bool):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(folder))
    inputs = tok(text, return_tensors="pt")
    with torch.set_grad_enabled(grad):
        out = model(**inputs, output_attentions=True)
    return out, tok.convert_ids_to_tokens(inputs["input_ids"][0])


def test_sdpa_gives_no_attentions_and_from_attentions_says_why_and_what_to_do(eager_copy, tiny_bert_dir, tiny_text):
    sdpa = eager_copy(tiny_bert_dir, "sdpa")
    out, tokens = _run(sdpa, tiny_bert_dir, tiny_text, grad=False)
    assert out.attentions == ()  # what transformers' default attention returns
    for nothing in (out.attentions, None, [None, None]):
        with pytest.raises(attnviz.InputError) as err:
            AttentionTrace.from_attentions(nothing, tokens)
        message = str(err.value)
        assert 'attn_implementation="eager"' in message and "attnviz.trace" in message


def test_eager_attentions_with_gradients_are_taken_as_they_are(eager_copy, tiny_bert_dir, tiny_text):
    model = eager_copy(tiny_bert_dir)
    out, tokens = _run(model, tiny_bert_dir, tiny_text, grad=True)
    assert out.attentions[0].requires_grad  # outside torch.no_grad(), as in a training loop
    tr = AttentionTrace.from_attentions(out.attentions, tokens)
    expected = torch.stack(out.attentions)[:, 0].detach().numpy()
    assert not tr.has("scores") and tr.weights.shape == expected.shape == (2, 4, len(tokens), len(tokens))
    np.testing.assert_array_equal(tr.weights, expected)
    np.testing.assert_array_equal(AttentionTrace.from_attentions(list(out.attentions), tokens).weights, expected)
    stacked = torch.stack(out.attentions)  # one [layer, batch, head, query, key] tensor works too
    np.testing.assert_array_equal(AttentionTrace.from_attentions(stacked, tokens).weights, expected)


def test_bfloat16_attentions_become_float32_with_their_values(eager_copy, tiny_bert_dir, tiny_text):
    model = copy.deepcopy(eager_copy(tiny_bert_dir)).to(torch.bfloat16)
    out, tokens = _run(model, tiny_bert_dir, tiny_text, grad=True)
    assert out.attentions[0].dtype == torch.bfloat16
    tr = AttentionTrace.from_attentions(out.attentions, tokens)
    assert tr.weights.dtype == np.float32
    np.testing.assert_array_equal(tr.weights, torch.stack(out.attentions)[:, 0].detach().float().numpy())
    np.testing.assert_allclose(tr.weights.sum(-1), 1.0, atol=0.05)  # bfloat16 rows still sum to about 1


class Wrapped(torch.Tensor):
    """A tensor subclass that sees every torch op on it, as device-backed wrapper tensors do."""

    ops: list = []

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        cls.ops.append(getattr(func, "__name__", str(func)))
        return super().__torch_function__(func, types, args, kwargs or {})


def test_a_wrapped_non_contiguous_half_tensor_is_moved_to_the_host_as_plain_numbers():
    g = torch.Generator().manual_seed(0)
    w = torch.softmax(torch.randn(1, 2, 5, 3, generator=g), -1).transpose(-1, -2)  # [1, 2, 3, 5], not contiguous
    wrapped = w.half().as_subclass(Wrapped)
    Wrapped.ops.clear()
    tr = AttentionTrace.from_attentions((wrapped, wrapped), list("abc"), key_tokens=list("vwxyz"))
    assert Wrapped.ops and not {"numpy", "__array__"} & set(Wrapped.ops)  # moved by torch ops, read as a plain tensor
    np.testing.assert_array_equal(tr.weights[1], w[0].half().float().numpy())
    assert (tr.n_tokens, tr.n_keys) == (3, 5)


def test_what_holds_no_weights_or_does_not_fit_is_refused_clearly():
    w = torch.full((1, 2, 3, 3), 1 / 3)
    with pytest.raises(attnviz.InputError, match="meta device"):
        AttentionTrace.from_attentions((w.to("meta"),), list("abc"))
    with pytest.raises(attnviz.InputError, match="batch item 1 does not exist"):
        AttentionTrace.from_attentions((w,), list("abc"), item=1)
    with pytest.raises(attnviz.InputError, match="one shape"):
        AttentionTrace.from_attentions((w, torch.full((1, 3, 3, 3), 1 / 3)), list("abc"))
    with pytest.raises(attnviz.InputError, match="tuple or list"):
        AttentionTrace.from_attentions(3, list("abc"))
    with pytest.raises(attnviz.AttnvizError, match="does not match"):
        AttentionTrace.from_attentions((w,), list("abcd"))
