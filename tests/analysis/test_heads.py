"""Head statistics checked against loops written out by hand and against TransformerLens's own construction."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy.stats import entropy

from attnviz.analysis import heads as H
from attnviz.trace import AttentionTrace, Provenance

TOKENS = ["[CLS]", "the", "cat", ",", "the", "dog", ".", "[SEP]"]
IDS = (101, 1996, 4937, 1010, 1996, 3899, 1012, 102)


def random_weights(n_layer=2, n_head=3, n=8, seed=0):
    rng = np.random.default_rng(seed)
    w = rng.random((n_layer, n_head, n, n)) ** 4
    return w / w.sum(-1, keepdims=True)


def weights_trace(w, ids=IDS, tokens=TOKENS):
    return AttentionTrace.from_weights(tokens, w, provenance=Provenance(model="hand", input_ids=ids))


def loop_stats(w, special, punct, rows):
    """Clark et al.'s numbers for one head, written as plain loops over the rows."""
    n = w.shape[0]
    out = {k: [] for k in ("entropy", "distance", "special", "punctuation")}
    prev, nxt, own = [], [], []
    for i in range(n):
        if not rows[i]:
            continue
        out["entropy"].append(entropy(w[i]))  # scipy, natural log
        out["distance"].append(sum(w[i, j] * abs(i - j) for j in range(n)))
        out["special"].append(sum(w[i, j] for j in range(n) if special[j]))
        out["punctuation"].append(sum(w[i, j] for j in range(n) if punct[j]))
        own.append(w[i, i])
        if i > 0:
            prev.append(w[i, i - 1])
        if i < n - 1:
            nxt.append(w[i, i + 1])
    res = {k: np.mean(v) for k, v in out.items()}
    res.update(previous=np.mean(prev), next=np.mean(nxt), self=np.mean(own))
    return res


def test_clark_statistics_equal_hand_loops():
    w = random_weights()
    tr = weights_trace(w)
    special = H.special_keys(tr, special_ids=[101, 102, 0])
    assert special.tolist() == [True] + [False] * 6 + [True]
    punct = H.punctuation_keys(tr)
    assert punct.tolist() == [False, False, False, True, False, False, True, False]
    stats = H.head_stats(tr, special)
    rows = np.ones(len(TOKENS), bool)
    for layer in range(2):
        for head in range(3):
            want = loop_stats(w[layer, head], special, punct, rows)
            for name, value in want.items():
                assert stats[name][layer, head] == pytest.approx(value, abs=1e-6), name


def test_hiding_special_tokens_renormalises_rows_and_drops_their_queries():
    w = random_weights(seed=1)
    tr = weights_trace(w)
    special = H.special_keys(tr, special_tokens=["[CLS]", "[SEP]"])  # by token text this time
    stats = H.head_stats(tr, special, hide_special=True)
    assert stats.renormalised
    np.testing.assert_allclose(stats["special"], 0.0)
    hidden = w.copy()
    hidden[..., special] = 0
    hidden /= hidden.sum(-1, keepdims=True)
    rows = ~special
    for layer, head in [(0, 0), (1, 2)]:
        want = loop_stats(hidden[layer, head], special, H.punctuation_keys(tr), rows)
        assert stats["entropy"][layer, head] == pytest.approx(want["entropy"], abs=1e-6)
        assert stats["previous"][layer, head] == pytest.approx(want["previous"], abs=1e-6)
    np.testing.assert_allclose(H.hide_keys(w, special).sum(-1), 1.0, atol=1e-12)


def test_one_hot_heads_score_what_they_are():
    n = len(TOKENS)
    prev = np.eye(n, k=-1)
    prev[0, 0] = 1.0  # the first token has no previous one: it keeps its attention
    w = np.stack([prev, np.eye(n)])[None]  # layer 0: a previous-token head and a self head
    stats = H.head_stats(weights_trace(w), np.zeros(n, bool))
    assert stats["previous"][0, 0] == pytest.approx(1.0)
    assert stats["previous_score"][0, 0] == pytest.approx((n - 1) / n)  # row 0's weight lies off the pattern
    assert stats["self"][0, 1] == pytest.approx(1.0) and stats["entropy"][0, 1] == pytest.approx(0.0)
    assert stats["distance"][0, 1] == 0.0 and stats["distance"][0, 0] == pytest.approx((n - 1) / n)


# --- TransformerLens's detection patterns, rebuilt the way head_detector.py builds them (torch) ---------


def tl_previous(tokens):
    p = torch.zeros(tokens.shape[-1], tokens.shape[-1])
    p[1:, :-1] = torch.eye(tokens.shape[-1] - 1)
    return torch.tril(p)


def tl_duplicate(tokens):
    tp = tokens.repeat(tokens.shape[-1], 1).numpy()
    eq = np.equal(tp, tp.T).astype(int)
    np.fill_diagonal(eq, 0)
    return torch.tril(torch.as_tensor(eq).float())


def tl_induction(tokens):
    dup = tl_duplicate(tokens)
    shifted = torch.roll(dup, shifts=1, dims=1)
    return torch.tril(torch.cat((torch.zeros(dup.shape[0], 1), shifted[:, 1:]), dim=1))


def test_detection_patterns_match_transformer_lens_construction():
    ids = torch.tensor([5, 7, 9, 5, 7, 9, 5, 3, 3])
    np.testing.assert_array_equal(H.previous_pattern(len(ids)), tl_previous(ids).numpy())
    np.testing.assert_array_equal(H.duplicate_pattern(ids.numpy()), tl_duplicate(ids).numpy())
    np.testing.assert_array_equal(H.induction_pattern(ids.numpy()), tl_induction(ids).numpy())


def test_pattern_scores_equal_transformer_lens_mul_measure():
    w = random_weights(n_layer=1, n_head=2, n=len(IDS), seed=3)
    tr = weights_trace(w)
    stats = H.head_stats(tr, np.zeros(len(IDS), bool))
    ids = torch.tensor(IDS)
    for head in range(2):
        a = torch.tensor(w[0, head])
        assert stats["previous_score"][0, head] == pytest.approx(((a * tl_previous(ids)).sum() / a.sum()).item())
        assert stats["duplicate_score"][0, head] == pytest.approx(((a * tl_duplicate(ids)).sum() / a.sum()).item())
    ind = H.induction_scores(tr)
    a = torch.tensor(w[0, 1])
    assert ind[0, 1] == pytest.approx(((a * tl_induction(ids)).sum() / a.sum()).item())


@pytest.mark.parametrize("hide", [False, True])
def test_statistics_read_a_few_query_rows_at_a_time_equal_hand_loops(monkeypatch, hide):
    """A long text's statistics are summed over blocks of query rows (every key of them): with blocks of 3 of the 8
    rows (the last one short), every head's numbers are still the hand loops' and TransformerLens's."""
    monkeypatch.setattr(H, "BLOCK_CELLS", 3 * 3 * len(TOKENS))  # 3 heads x 3 rows x 8 keys
    w = random_weights(seed=2)
    tr = weights_trace(w)
    special = H.special_keys(tr, special_ids=[101, 102])
    stats = H.head_stats(tr, special, hide_special=hide)
    seen = H.hide_keys(w, special) if hide else w
    rows = ~special if hide else np.ones(len(TOKENS), bool)
    ids = torch.tensor(IDS)
    for layer in range(2):
        for head in range(3):
            want = loop_stats(seen[layer, head], special, H.punctuation_keys(tr), rows)
            for name, value in want.items():
                assert stats[name][layer, head] == pytest.approx(value, abs=1e-6), name  # weights kept as float32
            kept = torch.tensor(np.where(rows[:, None], seen[layer, head], 0.0))  # the rows the averages read
            for name, pattern in (("previous_score", tl_previous(ids)), ("duplicate_score", tl_duplicate(ids))):
                assert stats[name][layer, head] == pytest.approx(tl_mul_score(kept, pattern), abs=1e-6), name


def test_padding_queries_are_left_out(tiny_bert, tiny_text):
    import attnviz

    tr = attnviz.trace(tiny_bert, tiny_text, pad_to=16)
    special = H.special_keys(tr, *H.special_tokens_of(tiny_bert.tokenizer))
    assert special[-1] and special[0]  # [PAD] and [CLS] are special
    stats = H.head_stats(tr, special)
    rows = tr.layer_mask(1).any(0)  # padding: the keys no query may attend
    assert rows.sum() == len(tiny_text.split()) + 2
    w = tr.layer(1).weights.astype(np.float64)
    want = loop_stats(w[2], special, H.punctuation_keys(tr), rows)
    assert stats["entropy"][1, 2] == pytest.approx(want["entropy"], abs=1e-5)
    assert stats["special"][1, 2] == pytest.approx(want["special"], abs=1e-5)


def tl_mul_score(attention_pattern, detection_pattern) -> float:
    """head_detector.compute_head_attention_similarity_score, error_measure="mul", no exclusions."""
    score = attention_pattern * detection_pattern
    return (score.sum() / attention_pattern.sum()).item()


def test_pattern_scores_of_the_bundled_trace_plain_and_padded_equal_transformer_lens(bundled):
    import attnviz

    text = H.repeated_random_text(bundled.tokenizer, n=10, seed=1)
    plain = attnviz.trace(bundled, text)
    n = plain.n_tokens
    ids = torch.tensor(plain.provenance.input_ids)
    patterns = {
        "induction": tl_induction(ids),
        "previous_score": tl_previous(ids),
        "duplicate_score": tl_duplicate(ids),
    }
    for tr in (plain, attnviz.trace(bundled, text, pad_to=n + 4)):
        got = {"induction": H.induction_scores(tr)} | dict(H.head_stats(tr, np.zeros(tr.n_keys, bool)).values)
        w = torch.tensor(tr.weights[..., :n, :n].astype(np.float64))  # TransformerLens traces the sentence alone
        for layer in range(tr.n_layer):
            for head in range(tr.n_head):
                for name, pattern in patterns.items():
                    want = tl_mul_score(w[layer, head], pattern)
                    assert got[name][layer, head] == pytest.approx(want, abs=1e-6), (name, layer, head, tr.n_tokens)


def test_repeated_random_text_repeats_its_ids_exactly(bundled):
    text = H.repeated_random_text(bundled.tokenizer, n=12, seed=4)
    ids = bundled.tokenizer(text, add_special_tokens=False)["input_ids"]
    assert len(ids) == 24 and ids[:12] == ids[12:] and len(set(ids[:12])) == 12
    assert text == H.repeated_random_text(bundled.tokenizer, n=12, seed=4)


def test_rows_table_has_one_row_per_head():
    stats = H.head_stats(weights_trace(random_weights()), np.zeros(len(TOKENS), bool))
    rows = stats.rows()
    assert len(rows) == 6 and rows[4]["layer"] == 1 and rows[4]["head"] == 1
    assert set(rows[0]) == {"layer", "head", *H.STATISTICS}


def test_punctuation_recognises_subword_marks():
    assert H.is_punctuation("##.") and H.is_punctuation("Ġ,") and H.is_punctuation("?)")
    assert not H.is_punctuation("cat") and not H.is_punctuation("Ġ") and not H.is_punctuation("a.")
