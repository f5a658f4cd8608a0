"""More own-code families read stage by stage (attnviz.hf.readers): GPT, XGLM, GPT-Neo, GPT-J, CodeGen, XLM, FlauBERT.

Each is compared with transformers' own eager attention (output_attentions=True) of a copy loaded independently from
the same folder, on a plain and a right-padded text. GPT-Neo is built with a 4-token window so that its local layer
really hides keys; GPT-J's scores are compared with q.k computed here from the projection weights and a rotary
embedding written out in numpy (every second feature pair rotated, on the first rotary_dim features only).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import attnviz
from tests.hf import families as fm

FAMILIES = ["openai-gpt", "xglm", "gpt_neo", "gptj", "codegen", "xlm", "flaubert"]
BIDIRECTIONAL = {"xlm", "flaubert"}
SCALE_ON_Q = {"xglm", "xlm", "flaubert"}  # the model multiplies (or divides) q before q.k
TEXT = fm.TEXT
ATOL = 1e-5
WINDOW = 4  # more than the 3 padding tokens of the check at load


def _build(family, folder):
    if family != "gpt_neo":
        return fm.build(family, folder)
    config = fm.tiny_config("gpt_neo")
    config.window_size = WINDOW  # layer 0 global, layer 1 local: a 4-token window hides keys in an 11-token text
    from transformers import GPTNeoModel

    torch.manual_seed(0)
    return fm.save(GPTNeoModel(config), folder)


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("own-families")
    return {f: _build(f, root / f) for f in FAMILIES}


def _expected_mask(family, layer, n, n_real):
    allowed = np.ones((n, n), bool) if family in BIDIRECTIONAL else np.tril(np.ones((n, n), bool))
    if family == "gpt_neo" and layer == 1:  # the local layer: only the last WINDOW keys up to the query
        allowed &= ~np.tril(np.ones((n, n), bool), -WINDOW)
    allowed[:, n_real:] = False
    return allowed


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("pad", [0, 2])  # 2 < WINDOW: every padded query still sees a key
def test_every_stage_equals_eager_attention(family, pad, folders):
    loaded, tr, n_real = fm.padded_trace(folders[family], pad)
    assert loaded.route == "readers" and loaded.note == ""
    assert tr.available_stages == attnviz.STAGES and tr.has("scores")
    assert "own attention code" in tr.provenance.attn_implementation
    ref = fm.eager_attentions(folders[family], list(tr.provenance.input_ids), n_real)
    np.testing.assert_allclose(tr.weights, ref, rtol=0, atol=ATOL)
    for layer in range(tr.n_layer):
        np.testing.assert_array_equal(tr.layer_mask(layer), _expected_mask(family, layer, tr.n_tokens, n_real))
    np.testing.assert_allclose(tr.scale, 1.0 if family == "gpt_neo" else 8**-0.5)
    assert set(tr.scale_on) == {"q" if family in SCALE_ON_Q else "scores"}
    stages = tr.layer(0)  # the stages are what the definitions say, from the recorded scores
    np.testing.assert_allclose(stages.scaled, stages.scores * tr.scale[0], rtol=1e-6, atol=1e-6)
    hidden = ~tr.layer_mask(0)
    assert (stages.masked[:, hidden] == np.float32(tr.fill[0])).all()


def _rotate_every_two(x, positions, rotary_dim):
    """GPT-J's rotary embedding written out: pair (2i, 2i+1) of the first rotary_dim features turned by pos * f_i."""
    freq = 1.0 / 10000 ** (np.arange(0, rotary_dim, 2) / rotary_dim)
    angle = positions[:, None] * freq[None]  # [seq, rotary_dim / 2]
    cos, sin = np.cos(angle), np.sin(angle)
    out = x.copy()
    even, odd = x[..., 0:rotary_dim:2], x[..., 1:rotary_dim:2]
    out[..., 0:rotary_dim:2] = even * cos - odd * sin
    out[..., 1:rotary_dim:2] = odd * cos + even * sin
    return out


def test_gptj_scores_are_q_dot_k_with_rotary_on_part_of_the_head(folders):
    loaded = attnviz.load_model(str(folders["gptj"]), device="cpu")
    tr = attnviz.trace(loaded, TEXT)
    n, module = tr.n_tokens, loaded.attention_modules[1]
    assert module.rotary_dim == 4 < 8  # half of each head is rotated, half passes through
    x, _, _ = attnviz.attention_inputs(loaded, TEXT, 1)
    x = x.numpy().astype(np.float64)
    q, k = (x @ p.weight.detach().numpy().T.astype(np.float64) for p in (module.q_proj, module.k_proj))
    q, k = (t.reshape(n, 4, 8).transpose(1, 0, 2) for t in (q, k))  # [head, seq, d]
    q, k = (_rotate_every_two(t, np.arange(n, dtype=np.float64), 4) for t in (q, k))
    np.testing.assert_allclose(tr.layer(1).scores, q @ k.transpose(0, 2, 1), rtol=0, atol=ATOL)


def test_gpt_neo_has_no_scale_and_its_scores_are_q_dot_k(folders):
    loaded = attnviz.load_model(str(folders["gpt_neo"]), device="cpu")
    tr = attnviz.trace(loaded, TEXT)
    n, module = tr.n_tokens, loaded.attention_modules[1]
    x, _, _ = attnviz.attention_inputs(loaded, TEXT, 1)
    q, k = (
        (x @ p.weight.detach().T).reshape(n, 4, 8).transpose(0, 1) for p in (module.q_proj, module.k_proj)
    )  # fmt: skip
    stages = tr.layer(1)
    np.testing.assert_allclose(stages.scores, (q @ k.transpose(-2, -1)).numpy(), rtol=0, atol=ATOL)
    np.testing.assert_array_equal(stages.scaled, stages.scores)  # scale 1.0: GPT-Neo never divides by sqrt(d)


def test_a_padded_query_its_window_hides_entirely_is_refused_not_misread(folders):
    """GPT-Neo fills a cell hidden by its window with min and one hidden by both window and padding with -inf: a row
    with no visible key spreads its weight over the first kind only, which one fill cannot show. Refused, clearly."""
    loaded = attnviz.load_model(str(folders["gpt_neo"]), device="cpu")
    n_real = attnviz.trace(loaded, TEXT).n_tokens
    with pytest.raises(attnviz.InputError, match="hides every key a query may see"):
        attnviz.trace(loaded, TEXT, pad_to=n_real + WINDOW + 1)
    tr = attnviz.trace(loaded, TEXT, pad_to=n_real + WINDOW + 1, pad_mask=False)  # padding visible: nothing hidden
    ref = fm.eager_attentions(folders["gpt_neo"], list(tr.provenance.input_ids), len(tr.provenance.input_ids))
    np.testing.assert_allclose(tr.weights, ref, rtol=0, atol=ATOL)


@pytest.mark.parametrize("family", ["xlm", "gpt_neo"])
def test_experiments_are_refused(family, folders):
    loaded = attnviz.load_model(str(folders[family]), device="cpu")
    with pytest.raises(attnviz.InputError, match="cannot change its mask or scale"):
        attnviz.trace(loaded, TEXT, causal=True)
