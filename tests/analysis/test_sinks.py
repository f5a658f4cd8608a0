"""attnviz.analysis.sinks against independent computations: transformers' eager attention (the bundled BERT, plain
and padded; a causal grouped-query Llama, padded), with the rows that count chosen from the input's own
attention_mask, and gpt-oss's learned sink against what eager attention leaves out of each row."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import attnviz
from attnviz.analysis import sinks
from tests.hf import families as fm
from tests.tiny_families import build

TEXT = "the cat sat on the mat . a dog ran away"


def expected_share(eager: np.ndarray, n_real: int, keys, causal_from: int = 0) -> np.ndarray:
    """[layer, head] from eager weights [layer, head, query, key]: the mean over the real (unpadded) query rows of
    the weight on `keys`; every real row sees key 0 in these models (bidirectional, or causal with key 0 first)."""
    rows = eager[:, :, causal_from:n_real, :]
    return rows[..., list(keys)].sum(axis=-1).mean(axis=-1)


@pytest.mark.parametrize("pad_to", [None, 24])
def test_sink_share_of_the_bundled_model_equals_eager_attention(bundled, bundled_eager, eager_reference, pad_to):
    tr = attnviz.trace(bundled, TEXT, pad_to=pad_to)
    eager, _ = eager_reference(bundled_eager, bundled, TEXT, pad_to=pad_to)
    n_real = len(bundled.tokenizer(TEXT, split_special_tokens=True)["input_ids"])
    for keys in [(0,), (0, n_real - 1)]:
        got = sinks.sink_share(tr, keys)
        assert got.shape == (tr.n_layer, tr.n_head)
        np.testing.assert_allclose(got, expected_share(eager, n_real, keys), atol=2e-6)
    assert sinks.reading_rows(tr, 0).sum() == n_real  # padding never counts


def test_sink_share_of_a_causal_grouped_llama_equals_eager_attention(tiny_llama, tiny_llama_dir):
    tr = attnviz.trace(tiny_llama, TEXT, pad_to=20)
    ids = list(tr.provenance.input_ids)
    n_real = len(tiny_llama.tokenizer(TEXT, split_special_tokens=True)["input_ids"])
    eager = fm.eager_attentions(tiny_llama_dir, ids, n_real)
    np.testing.assert_allclose(sinks.sink_share(tr), expected_share(eager, n_real, (0,)), atol=2e-6)
    # key 3 is seen only by queries 3.. in a causal model: the earlier rows are left out of its mean
    third = eager[:, :, 3:n_real, 3].mean(axis=-1)
    np.testing.assert_allclose(sinks.sink_share(tr, keys=(3,)), third, atol=2e-6)


def test_a_sink_no_row_may_see_gives_nan_and_bad_keys_are_refused(bundled):
    hidden = attnviz.trace(bundled, TEXT, hide=[0])
    assert np.isnan(sinks.sink_share(hidden, keys=(0,))).all()
    with pytest.raises(attnviz.AttnvizError):
        sinks.sink_share(hidden, keys=(999,))
    with pytest.raises(attnviz.AttnvizError):
        sinks.sink_share(hidden, keys=())


def test_without_keys_renormalises_every_row_over_the_other_keys():
    rng = np.random.default_rng(0)
    w = rng.dirichlet(np.ones(6), size=(2, 5)).astype(np.float32)  # [head, query, key], rows sum to 1
    w[0, 0] = [1, 0, 0, 0, 0, 0]  # a row that gave everything to the sink
    out = sinks.without_keys(w, keys=(0,))
    assert (out[..., 0] == 0).all() and (out[0, 0] == 0).all()
    kept = np.ones((2, 5), bool)
    kept[0, 0] = False
    np.testing.assert_allclose(out.sum(-1)[kept], 1.0, atol=1e-6)
    np.testing.assert_allclose(out[1, 2, 1:], w[1, 2, 1:] / w[1, 2, 1:].sum(), atol=1e-6)


def test_learned_sink_share_is_what_eager_attention_leaves_out_of_each_row(tmp_path, bundled):
    folder = build("gpt_oss", tmp_path / "gpt_oss")
    tr = attnviz.trace(attnviz.load_model(str(folder), device="cpu"), TEXT)
    with torch.no_grad():
        out = fm.eager_model(folder)(input_ids=torch.tensor([list(tr.provenance.input_ids)]), output_attentions=True)
    eager = fm.stack_attentions(out.attentions)
    want = (1.0 - eager.sum(axis=-1, dtype=np.float64)).mean(axis=-1)  # [layer, head]
    np.testing.assert_allclose(sinks.learned_sink_share(tr), want, atol=2e-6)
    assert (want > 0).all()  # the sink really took something, so the test can fail
    assert np.isnan(sinks.learned_sink_share(attnviz.trace(bundled, TEXT))).all()  # BERT has no learned sink
