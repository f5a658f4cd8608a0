"""A profile's numbers against the per-text code (attnviz.analysis.heads) and against numpy over transformers' own eager
attention, for a BERT, a GPT-2 and a grouped-query Llama."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.spatial.distance import jensenshannon
from scipy.stats import entropy

import attnviz
from attnviz.analysis import heads as H
from attnviz.analysis.values import value_share
from attnviz.corpus import profile
from attnviz.corpus.reducers import sampled_rows

TEXTS = ["the cat sat on the mat .", "a dog ran away , the dog was tired .", "hello world",
         "it was the cat , it was the dog .", "the mat the mat the mat", "because it was tired the cat ran away ."]  # fmt: skip
FAMILIES = ["tiny_bert", "tiny_gpt2", "tiny_llama"]


def numpy_text(a: np.ndarray, ids: list, tokens: list, special: set) -> dict:
    """One text's statistics from eager weights a [layer, head, T, T], written out with numpy and scipy."""
    n = a.shape[-1]
    i = np.arange(n)
    out = {"entropy": entropy(a, axis=-1).mean(-1), "distance": (a * np.abs(i[:, None] - i)).sum(-1).mean(-1),
           "special": a[..., [j for j in i if ids[j] in special]].sum(-1).mean(-1),
           "punctuation": a[..., [j for j in i if tokens[j] in (".", ",")]].sum(-1).mean(-1),
           "sink": a[..., 0].mean(-1), "self": a[..., i, i].mean(-1)}  # fmt: skip
    if n > 1:
        out["previous"] = a[..., i[1:], i[1:] - 1].mean(-1)
        out["next"] = a[..., i[:-1], i[:-1] + 1].mean(-1)
    total = a.sum((-1, -2))
    dup = [(q, k) for q in i for k in i if k < q and ids[k] == ids[q]]
    ind = [(q, k) for q in i for k in i if 1 <= k <= q and ids[k - 1] == ids[q]]
    for name, cells in (
        ("previous_score", [(q, q - 1) for q in i[1:]]),
        ("duplicate_score", dup),
        ("induction_score", ind),
    ):
        if cells:
            out[name] = sum(a[..., q, k] for q, k in cells) / total
    return out


@pytest.mark.parametrize("family", FAMILIES)
def test_profile_equals_per_text_code_and_numpy_over_eager(family, request, eager_copy, eager_reference):
    loaded = request.getfixturevalue(family)
    folder = request.getfixturevalue(f"{family}_dir")
    prof = profile(loaded, TEXTS, shard_size=4, bins=10, distance_rows=0)  # distances over every row
    ours, theirs, special = {}, {}, set(H.special_tokens_of(loaded.tokenizer)[0])
    js, rows, maxw = 0.0, 0, []
    for text in TEXTS:
        tr = attnviz.trace(loaded, text)
        sp = H.special_keys(tr, *H.special_tokens_of(loaded.tokenizer))
        for name, v in H.head_stats(tr, sp).values.items():
            ours.setdefault(name, []).append(v)
        shares = np.stack([value_share(tr, la) for la in range(tr.n_layer)])
        vw = attnviz.AttentionTrace.from_weights(tr.tokens, shares, provenance=tr.provenance)
        for name, v in H.head_stats(vw, sp).values.items():
            ours.setdefault(f"vw_{name}", []).append(v)
        ours.setdefault("vw_sink", []).append(shares[..., 0].mean(-1))  # the per-text code has no sink statistic
        eager = eager_reference(eager_copy(folder), loaded, text)[0].astype(np.float64)
        np.testing.assert_allclose(eager, tr.weights, atol=2e-6)  # the same text, the same weights
        for name, v in numpy_text(eager, list(tr.provenance.input_ids), tr.tokens, special).items():
            theirs.setdefault(name, []).append(v)
        flat = eager.reshape(-1, *eager.shape[2:])
        js += np.array([[(jensenshannon(p, q, axis=-1) ** 2).sum() for q in flat] for p in flat])
        rows += eager.shape[-1]
        maxw.append(eager.max(-1))
    for name in ("entropy", "distance", "special", "punctuation", "previous", "next", "self", "previous_score"):
        np.testing.assert_allclose(prof.stats[name], np.mean(ours[name], 0), atol=1e-5, err_msg=name)
    for name in ("entropy", "distance", "special", "punctuation", "sink", "previous", "next", "self"):
        np.testing.assert_allclose(prof.stats[f"vw_{name}"], np.mean(ours[f"vw_{name}"], 0), atol=1e-5, err_msg=name)
    for name, values in theirs.items():  # a pattern score counts the texts that have such cells (numpy_text)
        np.testing.assert_allclose(prof.stats[name], np.mean(values, 0), atol=1e-5, err_msg=name)
    assert len(theirs["duplicate_score"]) == 4 and len(theirs["induction_score"]) == 4
    n = loaded.n_layer * loaded.n_head
    np.testing.assert_allclose(prof.divergence, js / rows, atol=1e-5)
    hist = np.stack([np.histogram(np.concatenate([m[la, h] for m in maxw]), bins=10, range=(0, 1))[0]
                     for la in range(loaded.n_layer) for h in range(loaded.n_head)])  # fmt: skip
    np.testing.assert_array_equal(prof.histogram.reshape(n, -1), hist)
    strongest = sorted(((-m[0, 1, q], t, q) for t, m in enumerate(maxw) for q in range(m.shape[-1])))[:10]
    kept = [
        (e["text_id"], e["query"]) for e in prof.examples if (e["layer"], e["head"], e["kind"]) == (0, 1, "strongest")
    ]
    assert kept == [(t, q) for _, t, q in strongest]


def test_head_distances_over_a_seeded_sample_of_rows(tiny_gpt2):
    """By default the divergence is averaged over a few seeded rows per text: those rows' numpy/scipy divergence."""
    prof = profile(tiny_gpt2, TEXTS[:3], distance_rows=2)
    js, rows = 0.0, 0
    for t, text in enumerate(TEXTS[:3]):
        tr = attnviz.trace(tiny_gpt2, text)
        keep = sampled_rows(0, t, tr.n_tokens, 2)
        assert keep.sum() == min(2, tr.n_tokens) and (keep == sampled_rows(0, t, tr.n_tokens, 2)).all()
        flat = tr.weights.astype(np.float64)[:, :, keep].reshape(-1, int(keep.sum()), tr.n_keys)
        js += np.array([[(jensenshannon(p, q, axis=-1) ** 2).sum() for q in flat] for p in flat])
        rows += int(keep.sum())
    np.testing.assert_allclose(prof.divergence, js / rows, atol=1e-5)
    assert prof.provenance["settings"]["distance_rows"] == 2
