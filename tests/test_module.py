"""Our from-scratch attnviz.MultiHeadAttention against three independent references.

1. torch.nn.MultiheadAttention (copied with MultiHeadAttention.from_torch, seed 003's packed layout);
2. the numpy oracle attnviz.oracle (float64, seeds 001 and 003), including property tests with hypothesis;
3. a layer of a pretrained model (MultiHeadAttention.from_pretrained_layer) run on that layer's real inputs.
"""

from __future__ import annotations

import hashlib
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from oracle import np_multihead, np_packed_multihead

import attnviz
from attnviz import ModuleSource, MultiHeadAttention, causal_mask, module_from_layer, seeded_module, softmax
from attnviz.analysis.masks import COMMON_FILLS
from attnviz.hf.layers import output_projection

ROOT = Path(__file__).resolve().parents[1]

TEXT = "The cat sat on the mat because it was tired."
ATOL = 1e-5
FILL_VALUES = [COMMON_FILLS["-10000"], COMMON_FILLS["-1e9"], COMMON_FILLS["-inf"], COMMON_FILLS["float32 min"]]
FILL_IDS = ["-10000", "-1e9", "-inf", "min"]


def randn(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def oracle(module: MultiHeadAttention, q, k, v, **kw):
    """np_multihead with `module`'s weights; returns (output, weights) as float64 numpy."""
    p = {name: t.detach().numpy().astype(np.float64) for name, t in module.state_dict().items()}
    b = lambda name: p.get(f"{name}.bias")  # noqa: E731
    return np_multihead(
        q.numpy(), k.numpy(), v.numpy(),
        p["w_q.weight"], p["w_k.weight"], p["w_v.weight"], p["w_o.weight"], module.n_head,
        b_q=b("w_q"), b_k=b("w_k"), b_v=b("w_v"), b_o=b("w_o"), **kw,
    )  # fmt: skip


def close(actual, expected, atol=ATOL):
    actual = actual.detach().numpy() if isinstance(actual, torch.Tensor) else actual
    expected = expected.detach().numpy() if isinstance(expected, torch.Tensor) else expected
    np.testing.assert_allclose(actual, expected, rtol=0, atol=atol)


# --- construction ---------------------------------------------------------------------------------------


def test_d_model_not_divisible_by_n_head_raises_a_helpful_error():
    with pytest.raises(attnviz.AttnvizError) as info:
        MultiHeadAttention(100, 3)
    msg = str(info.value)
    assert "d_model=100" in msg and "n_head=3" in msg and "divisible" in msg
    assert "[1, 2, 4, 5, 10, 20, 25, 50]" in msg  # it suggests head counts that work


@pytest.mark.parametrize("d_model, n_head", [(0, 1), (8, 0), (8, -2)])
def test_non_positive_sizes_raise(d_model, n_head):
    with pytest.raises(attnviz.AttnvizError, match="positive"):
        MultiHeadAttention(d_model, n_head)


def test_seeded_module_through_module_source_reports_bad_head_count(bundled):
    with pytest.raises(attnviz.AttnvizError, match="not divisible"):
        attnviz.trace(ModuleSource(bundled, n_head=5), TEXT)


def test_wrong_input_width_raises():
    m = seeded_module(8, 2)
    with pytest.raises(attnviz.AttnvizError, match=r"\[batch, time, 8\]"):
        m(torch.zeros(1, 3, 6))


def _checksum(module: MultiHeadAttention) -> str:
    h = hashlib.sha256()
    for name, t in sorted(module.state_dict().items()):
        h.update(name.encode())
        h.update(t.detach().contiguous().numpy().tobytes())
    return h.hexdigest()


def test_seeded_module_is_identical_in_another_process():
    code = (
        "import hashlib, attnviz\n"
        "m = attnviz.seeded_module(24, 4, seed=7)\n"
        "h = hashlib.sha256()\n"
        "for name, t in sorted(m.state_dict().items()):\n"
        "    h.update(name.encode()); h.update(t.detach().contiguous().numpy().tobytes())\n"
        "print(h.hexdigest())\n"
    )
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == _checksum(seeded_module(24, 4, seed=7))


def test_seeded_module_depends_on_the_seed_and_leaves_the_global_rng_alone():
    state = torch.get_rng_state()
    a, b, c = seeded_module(24, 4, seed=7), seeded_module(24, 4, seed=7), seeded_module(24, 4, seed=8)
    assert torch.equal(torch.get_rng_state(), state)
    assert _checksum(a) == _checksum(b) != _checksum(c)
    assert not torch.allclose(a.w_q.weight, c.w_q.weight)


# --- against torch.nn.MultiheadAttention ----------------------------------------------------------------


def _torch_mha(d, n_head, bias, batch_first, seed=0):
    torch.manual_seed(seed)
    m = torch.nn.MultiheadAttention(d, n_head, bias=bias, batch_first=batch_first).eval()
    if bias:  # torch initialises the biases to 0: make them matter
        with torch.no_grad():
            m.in_proj_bias.normal_()
            m.out_proj.bias.normal_()
    return m


def _run_torch(m, q, k, v, batch_first, **kw):
    """q, k, v batch-first; returns batch-first output and per-head weights [B, nh, Tq, Tk]."""
    if not batch_first:
        q, k, v = (x.transpose(0, 1) for x in (q, k, v))
    with torch.no_grad():
        out, w = m(q, k, v, need_weights=True, average_attn_weights=False, **kw)
    return (out if batch_first else out.transpose(0, 1)), w


@pytest.mark.parametrize("batch_first", [True, False], ids=["batch_first", "seq_first"])
@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no_bias"])
def test_from_torch_matches_torch_self_attention(batch_first, bias):
    tm = _torch_mha(16, 4, bias, batch_first)
    ours = MultiHeadAttention.from_torch(tm)
    x = randn(3, 5, 16)
    ref_out, ref_w = _run_torch(tm, x, x, x, batch_first)
    with torch.no_grad():
        out, stages = ours(x)
    close(out, ref_out)
    close(stages.weights, ref_w)


@pytest.mark.parametrize("batch_first", [True, False], ids=["batch_first", "seq_first"])
@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no_bias"])
def test_from_torch_matches_torch_cross_attention_with_boolean_mask(batch_first, bias):
    """torch's attn_mask says True = NOT allowed; ours says True = may attend."""
    tm = _torch_mha(20, 5, bias, batch_first, seed=1)
    ours = MultiHeadAttention.from_torch(tm)
    q, kv = randn(2, 4, 20, seed=1), randn(2, 6, 20, seed=2)
    allowed = torch.rand(4, 6, generator=torch.Generator().manual_seed(3)) > 0.5
    allowed[:, 0] = True  # torch gives NaN on fully masked rows
    ref_out, ref_w = _run_torch(tm, q, kv, kv, batch_first, attn_mask=~allowed)
    with torch.no_grad():
        out, stages = ours(q, kv, kv, mask=allowed)
    close(out, ref_out)
    close(stages.weights, ref_w)
    assert (stages.weights[..., ~allowed] == 0).all()


def test_a_recorded_forward_gives_torchs_output_and_a_layer_whose_stages_are_torchs_weights():
    """forward(record=True): the trace's layer is made by the same call that computes the output, both equal torch's."""
    tm = _torch_mha(20, 5, True, True, seed=4)
    ours = MultiHeadAttention.from_torch(tm)
    q, kv = randn(1, 4, 20, seed=5), randn(1, 6, 20, seed=6)
    allowed = torch.rand(4, 6, generator=torch.Generator().manual_seed(7)) > 0.4
    allowed[:, 0] = True
    ref_out, ref_w = _run_torch(tm, q, kv, kv, True, attn_mask=~allowed)
    with torch.no_grad():
        out, layer = ours(q, kv, kv, mask=allowed, causal=False, record=True)
    close(out, ref_out)
    close(layer.stages(torch.arange(5)).weights, ref_w[0])
    # a window of keys alone is exact from the row normalisers the forward recorded, with or without autograd
    close(layer.stages(torch.arange(5), keys=slice(2, 4)).weights, ref_w[0][..., 2:4])
    out, graded = ours(q, kv, kv, mask=allowed, causal=False, record=True)  # a notebook's call outside no_grad
    close(graded.stages(torch.arange(5), keys=slice(1, 2)).weights, ref_w[0][..., 1:2])
    out.sum().backward()  # the output still trains the module; the record is a snapshot beside it
    assert ours.w_q.weight.grad is not None and bool(ours.w_q.weight.grad.abs().sum() > 0)
    # the values it keeps give torch's output too: sum over heads of weights @ v @ W_o[h] (+ the bias)
    v = layer.values.of_heads(torch.arange(5))  # [head, key, d_head]
    per_head = ref_w[0] @ v  # [head, query, d_head]
    close(per_head.transpose(0, 1).reshape(4, 20) @ tm.out_proj.weight.T + tm.out_proj.bias, ref_out[0])


@pytest.mark.parametrize("score", ["general", "additive"])
def test_a_recorded_forward_keeps_a_score_functions_scores_and_its_stages_equal_the_plain_forward(score):
    ours = seeded_module(16, 4, seed=2, score=score)
    x = randn(5, 16, seed=8)
    with torch.no_grad():
        out, stages = ours(x, causal=True)
        out_rec, layer = ours(x, causal=True, record=True)
    close(out_rec, out)
    assert layer.q is None and layer.scores is not None  # not a dot product: kept as its scores
    for name in ("scores", "scaled", "masked", "weights"):
        close(getattr(layer.stages(torch.arange(4)), name), getattr(stages, name))
    close(layer.stages(torch.arange(4), keys=slice(1, 3)).weights, stages.weights[..., 1:3])  # from the row norms


def test_from_torch_key_padding_mask_equals_valid_lens():
    tm = _torch_mha(12, 3, True, True, seed=2)
    ours = MultiHeadAttention.from_torch(tm)
    q, kv = randn(2, 4, 12, seed=4), randn(2, 6, 12, seed=5)
    valid = torch.tensor([3, 2])
    padding = torch.arange(6)[None, :] >= valid[:, None]  # torch: True = ignore this key
    ref_out, ref_w = _run_torch(tm, q, kv, kv, True, key_padding_mask=padding)
    with torch.no_grad():
        out, stages = ours(q, kv, kv, valid_lens=valid)
    close(out, ref_out)
    close(stages.weights, ref_w)


def test_from_torch_copies_the_packed_in_proj_layout():
    """Seed 003: in_proj_weight rows [0, d) are queries, [d, 2d) keys, [2d, 3d) values."""
    tm = _torch_mha(8, 2, True, True)
    ours = MultiHeadAttention.from_torch(tm)
    w = tm.in_proj_weight.detach()
    assert torch.equal(ours.w_q.weight, w[:8]) and torch.equal(ours.w_k.weight, w[8:16])
    assert torch.equal(ours.w_v.weight, w[16:])
    assert torch.equal(ours.w_o.weight, tm.out_proj.weight)
    assert torch.equal(ours.w_k.bias, tm.in_proj_bias[8:16])


def test_from_torch_rejects_layouts_it_cannot_copy():
    with pytest.raises(attnviz.AttnvizError, match="kdim"):
        MultiHeadAttention.from_torch(torch.nn.MultiheadAttention(8, 2, kdim=4, vdim=4))
    with pytest.raises(attnviz.AttnvizError, match="add_bias_kv"):
        MultiHeadAttention.from_torch(torch.nn.MultiheadAttention(8, 2, add_bias_kv=True))


def test_packed_numpy_oracle_matches_torch_and_ours():
    """Seed 003's numpy multihead_atten layout: inputs [T, B, d], no bias."""
    tm = _torch_mha(16, 4, False, False, seed=3)
    ours = MultiHeadAttention.from_torch(tm)
    x = randn(5, 2, 16, seed=6)  # [T, B, d]
    ref_out, ref_w = np_packed_multihead(
        x.numpy(), 4, tm.in_proj_weight.detach().numpy(), tm.out_proj.weight.detach().numpy()
    )
    with torch.no_grad():
        t_out, t_w = tm(x, x, x, need_weights=True, average_attn_weights=False)
        out, stages = ours(x.transpose(0, 1))
    close(t_out, ref_out)
    close(t_w, ref_w)
    close(out.transpose(0, 1), ref_out)
    close(stages.weights, ref_w)


# --- against the numpy oracle (seed 001 sizes) -----------------------------------------------------------


@pytest.fixture
def seed001():
    """batch 2, 4 queries, 6 key/value pairs, d_model 100, 5 heads, bias=False (seed 001)."""
    rng = np.random.default_rng(1)
    x = torch.from_numpy(rng.random((2, 4, 100)).astype(np.float32))
    y = torch.from_numpy(rng.random((2, 6, 100)).astype(np.float32))
    return seeded_module(100, 5, bias=False, seed=1), x, y


@pytest.mark.parametrize("fill", FILL_VALUES, ids=FILL_IDS)
def test_cross_attention_with_valid_lens_matches_oracle(seed001, fill):
    m, x, y = seed001
    valid = torch.tensor([3, 2])
    with torch.no_grad():
        out, stages = m(x, y, y, valid_lens=valid, fill=fill)
    ref_out, ref_w = oracle(m, x, y, y, valid_lens=valid.numpy(), fill=fill)
    assert out.shape == (2, 4, 100) and stages.weights.shape == (2, 5, 4, 6)
    close(out, ref_out)
    close(stages.weights, ref_w)
    assert (stages.weights[0, ..., 3:] == 0).all() and (stages.weights[1, ..., 2:] == 0).all()


def test_cross_attention_with_per_query_valid_lens_matches_oracle(seed001):
    m, x, y = seed001
    valid = torch.tensor([[1, 2, 3, 6], [6, 5, 0, 1]])  # one query sees nothing
    for fill in (COMMON_FILLS["-inf"], COMMON_FILLS["-10000"]):
        with torch.no_grad():
            out, stages = m(x, y, y, valid_lens=valid, fill=fill)
        ref_out, ref_w = oracle(m, x, y, y, valid_lens=valid.numpy(), fill=fill)
        close(out, ref_out)
        close(stages.weights, ref_w)
    assert (stages.weights[1, :, 2] == 1 / 6).all()  # finite fill: the empty row is uniform
    with torch.no_grad():
        _, dead = m(x, y, y, valid_lens=valid, fill=COMMON_FILLS["-inf"])
    assert (dead.weights[1, :, 2] == 0).all()  # -inf: it attends to nothing


def test_causal_cross_attention_matches_oracle(seed001):
    m, x, y = seed001
    with torch.no_grad():
        out, stages = m(x, y, y, causal=True)
    ref_out, ref_w = oracle(m, x, y, y, mask=causal_mask(4, 6).numpy())
    close(out, ref_out)
    close(stages.weights, ref_w)
    assert (stages.weights[..., ~causal_mask(4, 6)] == 0).all()


def test_seed000_style_zero_one_mask_means_zero_is_blocked(seed001):
    m, x, y = seed001
    mask01 = torch.tensor([[1, 1, 0, 1, 0, 1]] * 4)
    with torch.no_grad():
        _, a = m(x, y, y, mask=mask01, fill=COMMON_FILLS["-10000"])
        _, b = m(x, y, y, mask=mask01.bool(), fill=COMMON_FILLS["-10000"])
    assert torch.equal(a.weights, b.weights)
    assert (a.weights[..., [2, 4]] == 0).all()


def test_unbatched_input_gives_unbatched_stages():
    m = seeded_module(12, 3, seed=4)
    x = randn(5, 12)
    with torch.no_grad():
        out, stages = m(x)
        out_b, stages_b = m(x[None])
    assert out.shape == (5, 12) and stages.weights.shape == (3, 5, 5)
    close(out, out_b[0], atol=0)
    close(stages.weights, stages_b.weights[0], atol=0)


def test_scale_argument_replaces_one_over_sqrt_d_head():
    m = seeded_module(12, 3, seed=5)
    x = randn(2, 5, 12)
    with torch.no_grad():
        _, default = m(x)
        _, one = m(x, scale=1.0)
    torch.testing.assert_close(default.scaled, default.scores / math.sqrt(4), rtol=0, atol=0)
    torch.testing.assert_close(one.scaled, one.scores, rtol=0, atol=0)


# --- property tests --------------------------------------------------------------------------------------


@st.composite
def attention_cases(draw):
    batch, n_q, n_k = draw(st.integers(1, 3)), draw(st.integers(1, 7)), draw(st.integers(1, 7))
    n_head, d_head = draw(st.integers(1, 4)), draw(st.integers(1, 5))
    shape = draw(st.sampled_from(["none", "2d", "3d", "4d"]))
    mask_shape = {"none": None, "2d": (n_q, n_k), "3d": (batch, n_q, n_k), "4d": (batch, 1, n_q, n_k)}[shape]
    mask = None
    if mask_shape is not None:
        bits = draw(st.lists(st.booleans(), min_size=math.prod(mask_shape), max_size=math.prod(mask_shape)))
        mask = torch.tensor(bits, dtype=torch.bool).reshape(mask_shape)
    return dict(
        batch=batch, n_q=n_q, n_k=n_k, n_head=n_head, d_head=d_head, mask=mask,
        causal=draw(st.booleans()), bias=draw(st.booleans()),
        fill=draw(st.sampled_from(FILL_VALUES)), seed=draw(st.integers(0, 2**16)),
    )  # fmt: skip


def _as_4d(mask: torch.Tensor | None, batch: int) -> np.ndarray | None:
    """The documented meaning of each mask rank: [Tq, Tk], [B, Tq, Tk], [B, 1 or nh, Tq, Tk]."""
    if mask is None:
        return None
    if mask.dim() == 2:
        mask = mask[None, None]
    elif mask.dim() == 3:
        mask = mask[:, None]
    return mask.numpy()


@settings(max_examples=50, deadline=None)
@given(attention_cases())
def test_property_stages_and_oracle(case):
    B, n_q, n_k, nh, dh = case["batch"], case["n_q"], case["n_k"], case["n_head"], case["d_head"]
    fill = case["fill"]
    m = seeded_module(nh * dh, nh, bias=case["bias"], seed=case["seed"])
    q, kv = randn(B, n_q, nh * dh, seed=case["seed"]), randn(B, n_k, nh * dh, seed=case["seed"] + 1)
    with torch.no_grad():
        out, s = m(q, kv, kv, mask=case["mask"], causal=case["causal"], fill=fill)
    assert s.weights.shape == (B, nh, n_q, n_k) and out.shape == (B, n_q, nh * dh)

    allowed = np.ones((B, nh, n_q, n_k), bool)
    if case["mask"] is not None:
        allowed &= _as_4d(case["mask"], B)
    if case["causal"]:
        allowed &= causal_mask(n_q, n_k).numpy()
    w = s.weights.numpy()
    dead = ~allowed.any(-1)  # fully masked rows
    assert not np.isnan(w).any() and not np.isnan(out.numpy()).any()
    # masked cells are exactly 0 wherever the row keeps at least one key
    assert (w[~allowed & ~dead[..., None]] == 0).all()
    # rows sum to 1, or are all 0 exactly when fully masked with -inf (uniform with a finite fill)
    sums = w.sum(-1)
    if fill == float("-inf"):
        assert (w[dead] == 0).all()
        np.testing.assert_allclose(sums[~dead], 1.0, atol=1e-5)
    else:
        np.testing.assert_allclose(sums, 1.0, atol=1e-5)
        np.testing.assert_allclose(w[dead], 1 / n_k, rtol=1e-6)
    assert ((np.abs(sums) < 1e-12) == (dead & (fill == float("-inf")))).all()
    # the stages are defined from one another
    torch.testing.assert_close(s.scaled, s.scores * (1 / math.sqrt(dh)), rtol=0, atol=0)
    torch.testing.assert_close(softmax(s.masked), s.weights, rtol=0, atol=0)
    assert (s.masked.numpy()[~allowed] == np.float32(fill)).all()
    # and agree with the independent numpy implementation
    ref_out, ref_w = oracle(m, q, kv, kv, mask=allowed, fill=fill)
    close(w, ref_w)
    close(out, ref_out)


@settings(max_examples=30, deadline=None)
@given(
    batch=st.integers(1, 3),
    n_q=st.integers(1, 7),
    n_k=st.integers(1, 7),
    data=st.data(),
)
def test_property_valid_lens_match_oracle(batch, n_q, n_k, data):
    per_query = data.draw(st.booleans())
    shape = (batch, n_q) if per_query else (batch,)
    valid = np.array(data.draw(st.lists(st.integers(0, n_k), min_size=math.prod(shape), max_size=math.prod(shape))))
    valid = valid.reshape(shape)
    m = seeded_module(6, 2, seed=batch * 100 + n_q * 10 + n_k)
    q, kv = randn(batch, n_q, 6, seed=n_q), randn(batch, n_k, 6, seed=n_k + 50)
    with torch.no_grad():
        out, s = m(q, kv, kv, valid_lens=torch.from_numpy(valid), fill=COMMON_FILLS["-inf"])
    ref_out, ref_w = oracle(m, q, kv, kv, valid_lens=valid, fill=COMMON_FILLS["-inf"])
    close(s.weights, ref_w)
    close(out, ref_out)


# --- against a pretrained layer ------------------------------------------------------------------------


def _layer_reference(loaded, text, layer):
    """(trace weights of `layer` [H, T, T], output of that layer's attention output projection [T, d])."""
    out_module = output_projection(loaded, layer)
    seen = []
    handle = out_module.register_forward_hook(lambda mod, args, out: seen.append(out[0].detach().clone()))
    try:
        tr = attnviz.trace(loaded, text)
    finally:
        handle.remove()
    assert len(seen) == 1
    return tr.weights[layer], seen[0]


@pytest.mark.parametrize("layer", [0, 3, 5])
def test_from_pretrained_layer_reproduces_the_bundled_layer(bundled, layer):
    ours = module_from_layer(bundled, layer)
    assert (ours.d_model, ours.n_head, ours.causal) == (384, 12, False)
    x, tokens, _ = attnviz.attention_inputs(bundled, TEXT, layer)
    assert x.shape == (len(tokens), 384)
    ref_w, ref_out = _layer_reference(bundled, TEXT, layer)
    with torch.no_grad():
        out, stages = ours(x)
    close(stages.weights, ref_w)
    close(out, ref_out)


@pytest.mark.parametrize("kind", ["bert", "gpt2"])
@pytest.mark.parametrize("layer", [0, 1])
def test_from_pretrained_layer_reproduces_tiny_layers(request, kind, layer, tiny_text):
    loaded = request.getfixturevalue(f"tiny_{kind}")
    ours = module_from_layer(loaded, layer)
    assert ours.causal == (kind == "gpt2")  # a copied decoder layer is causal
    x, _, _ = attnviz.attention_inputs(loaded, tiny_text, layer)
    ref_w, ref_out = _layer_reference(loaded, tiny_text, layer)
    with torch.no_grad():
        out, stages = ours(x)  # GPT-2 and BERT both scale by 1/sqrt(d_head)
    close(stages.weights, ref_w)
    close(out, ref_out)
    if kind == "gpt2":
        T = x.shape[0]
        assert (stages.weights[:, ~causal_mask(T)] == 0).all()


def test_from_pretrained_layer_explains_unsupported_rotary_models(tiny_llama):
    with pytest.raises(attnviz.InputError, match="rotary"):
        module_from_layer(tiny_llama, 0)


def test_from_pretrained_layer_rejects_a_missing_layer(bundled):
    with pytest.raises(attnviz.InputError, match="0..5"):
        module_from_layer(bundled, 6)


# --- our module traced on a sentence ----------------------------------------------------------------------


@pytest.mark.parametrize("layer", [0, 2])
def test_module_source_with_pretrained_weights_equals_the_pretrained_trace(bundled, layer):
    plain = attnviz.trace(bundled, TEXT)
    src = ModuleSource(bundled, weights="pretrained", inputs="hidden", layer=layer)
    tr = attnviz.trace(src, TEXT)
    assert tr.provenance.kind == "module" and tr.n_layer == 1 and tr.tokens == plain.tokens
    close(tr.weights[0], plain.weights[layer])
    close(tr.scores[0], plain.scores[layer], atol=1e-4)
    np.testing.assert_allclose(tr.scale, plain.scale[layer])


def test_module_source_trace_stages_are_consistent(bundled):
    tr = attnviz.trace(ModuleSource(bundled, inputs="random", seed=3), TEXT, causal=True, hide=[2], fill=-1e9)
    upper = np.triu(np.ones((tr.n_tokens, tr.n_tokens), bool), k=1)
    assert not tr.mask[0][upper].any() and not tr.mask[0][:, 2].any()
    assert (tr.weights[0][:, upper] == 0).all() and (tr.weights[0][..., 2] == 0).all()
    close(softmax(torch.tensor(tr.masked)).numpy(), tr.weights, atol=1e-6)
    for name in attnviz.STAGES:
        np.testing.assert_array_equal(getattr(tr.recompute(0), name), getattr(tr, name)[0])
