"""What each head looks at, as one number per layer x head (the Head statistics page).

Two families of numbers, both computed from a head's weights [query, key]:

- Clark et al. 2019, "What Does BERT Look At?": how spread out a head is (entropy), how far it looks
  (mean distance), and how much of its attention goes to special tokens, punctuation, the previous
  token, the next token and the token itself. Each is averaged over the query rows that may attend.
- TransformerLens's head detectors (transformer_lens/head_detector.py, "mul" measure): a 0/1 detection
  pattern P over (query, key) says where a previous-token, duplicate-token or induction head would look;
  the score is the share of the head's whole attention that falls on P, sum(A * P) / sum(A).
  previous-token: P[i, i-1] = 1. duplicate-token: P[i, j] = 1 where j < i holds the same token id as i.
  induction: P[i, j] = 1 where j <= i and token j-1 equals token i (the token after an earlier copy of
  the current one), i.e. the duplicate pattern moved one key to the right with its first column cleared.
  TransformerLens scores induction on a random token sequence repeated twice: `repeated_random_ids`.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass

import numpy as np

from ..trace import AttentionTrace

#: Statistic id -> (label, what it means, colour range or None for 0..max). Shares and scores lie in 0..1.
STATISTICS = {
    "entropy": ("entropy (nats)", "how spread out each row is: 0 = one key, log(n) = uniform", None),
    "distance": ("mean distance (tokens)", "how far from the query the attention lands, on average", None),
    "special": ("to special tokens", "share of attention on [CLS], [SEP], BOS/EOS and the like", (0.0, 1.0)),
    "punctuation": ("to punctuation", "share of attention on punctuation tokens", (0.0, 1.0)),
    "previous": ("to previous token", "share of attention on the token just before the query", (0.0, 1.0)),
    "next": ("to next token", "share of attention on the token just after the query", (0.0, 1.0)),
    "self": ("to itself", "share of attention the query keeps on its own token", (0.0, 1.0)),
    "previous_score": ("previous-token score", "TransformerLens: sum(A * P_prev) / sum(A)", (0.0, 1.0)),
    "duplicate_score": ("duplicate-token score", "TransformerLens: share on earlier copies of the token", (0.0, 1.0)),
}
INDUCTION = ("induction score", "TransformerLens: share on the token after an earlier copy (repeated text)", (0.0, 1.0))
CLARK = ("entropy", "distance", "special", "punctuation", "previous", "next", "self")
WORD_MARKS = ("##", "Ġ", "▁", "Ċ")  # sub-word markers stripped before deciding whether a token is punctuation


@dataclass(frozen=True)
class HeadStats:
    """One [layer, head] float64 array per statistic id (see STATISTICS); `renormalised` if specials were hidden."""

    values: dict
    renormalised: bool

    def with_values(self, **extra: np.ndarray) -> HeadStats:
        """The same statistics plus more [layer, head] arrays (the page adds induction scores)."""
        return HeadStats({**self.values, **extra}, self.renormalised)

    def __getitem__(self, name: str) -> np.ndarray:
        return self.values[name]

    def rows(self) -> list[dict]:
        """One dict per (layer, head) with every statistic: the page's sortable table."""
        n_layer, n_head = next(iter(self.values.values())).shape
        return [
            {"layer": layer, "head": head, **{k: float(v[layer, head]) for k, v in self.values.items()}}
            for layer in range(n_layer)
            for head in range(n_head)
        ]


def is_punctuation(token: str) -> bool:
    """True for a token made only of punctuation characters (sub-word markers ignored): '.', ',', '##!', '?)'."""
    text = str(token)
    for mark in WORD_MARKS:
        text = text.replace(mark, "")
    text = text.strip()
    return bool(text) and all(unicodedata.category(c).startswith("P") for c in text)


def special_keys(trace: AttentionTrace, special_ids=(), special_tokens=()) -> np.ndarray:
    """bool [key]: positions holding a special token, by id (trace.provenance.input_ids) or else by token text.

    Pass the tokenizer's `all_special_ids` and `all_special_tokens`; a trace without input ids (our module
    on random vectors still has the tokens) falls back to matching the token strings.
    """
    ids = trace.provenance.input_ids
    if len(ids) == trace.n_keys and len(special_ids):
        return np.isin(np.asarray(ids), np.asarray(list(special_ids)))
    names = set(map(str, special_tokens))
    return np.array([t in names for t in trace.key_tokens], dtype=bool)


def punctuation_keys(trace: AttentionTrace) -> np.ndarray:
    """bool [key]: positions holding punctuation."""
    return np.array([is_punctuation(t) for t in trace.key_tokens], dtype=bool)


def hide_keys(weights: np.ndarray, hidden: np.ndarray) -> np.ndarray:
    """weights [..., query, key] with the `hidden` key columns set to 0 and every row renormalised to sum 1.

    A row whose whole weight was on hidden keys stays all 0 (there is nothing left to share out).
    """
    w = np.where(np.asarray(hidden, bool), 0.0, np.asarray(weights, np.float64))
    total = w.sum(axis=-1, keepdims=True)
    return np.divide(w, total, out=np.zeros_like(w), where=total > 0)


def offset_share(w: np.ndarray, rows: np.ndarray, offset: int) -> np.ndarray:
    """[head] mean of w[:, i, i + offset] over the chosen rows i that have such a key (0 if none has)."""
    i = np.flatnonzero(rows)
    j = i + offset
    ok = (j >= 0) & (j < w.shape[-1])
    if not ok.any():
        return np.zeros(w.shape[0])
    return w[:, i[ok], j[ok]].mean(axis=-1)


def pattern_score(weights: np.ndarray, pattern: np.ndarray) -> np.ndarray:
    """TransformerLens's "mul" score: sum(A * P) / sum(A) over [query, key], for every leading index.

    A boolean pattern sums only the cells it marks (no [query, key] product in memory: long texts)."""
    w = np.asarray(weights, np.float64)
    total = w.sum(axis=(-2, -1))
    pattern = np.asarray(pattern)
    if pattern.dtype == bool:
        hit = w[..., pattern].sum(axis=-1)
    else:
        hit = (w * np.asarray(pattern, np.float64)).sum(axis=(-2, -1))
    return np.divide(hit, total, out=np.zeros_like(hit), where=total > 0)


def previous_pattern(n: int) -> np.ndarray:
    """P[i, i-1] = True: a previous-token head."""
    return np.eye(n, k=-1, dtype=bool)


def duplicate_pattern(ids) -> np.ndarray:
    """P[i, j] = True where j < i and ids[j] == ids[i]: a head that finds earlier copies of the current token."""
    ids = np.asarray(ids)
    return np.tril(ids[:, None] == ids[None, :], k=-1)


def induction_pattern(ids) -> np.ndarray:
    """P[i, j] = True where 1 <= j <= i and ids[j - 1] == ids[i]: attend to what followed an earlier copy."""
    ids = np.asarray(ids)
    p = np.zeros((ids.size, ids.size), dtype=bool)
    p[:, 1:] = ids[:, None] == ids[None, :-1]
    return np.tril(p)


def layer_stats(weights: np.ndarray, rows: np.ndarray, special: np.ndarray, punct: np.ndarray) -> dict:
    """Clark-style statistics of one layer: weights [head, query, key]; rows bool [query] to average over."""
    w = np.asarray(weights, np.float64)
    if not rows.any():
        return {k: np.zeros(w.shape[0]) for k in CLARK}
    sel = w[:, rows]  # [head, chosen query, key]
    dist = np.abs(np.flatnonzero(rows)[:, None] - np.arange(w.shape[-1])[None, :])
    logs = np.log(np.where(sel > 0, sel, 1.0))
    return {
        "entropy": -(sel * logs).sum(axis=-1).mean(axis=-1),
        "distance": (sel * dist).sum(axis=-1).mean(axis=-1),
        "special": sel[..., special].sum(axis=-1).mean(axis=-1),
        "punctuation": sel[..., punct].sum(axis=-1).mean(axis=-1),
        "previous": offset_share(w, rows, -1),
        "next": offset_share(w, rows, 1),
        "self": offset_share(w, rows, 0),
    }


def query_rows(mask: np.ndarray | None, square: bool) -> np.ndarray | None:
    """bool [query]: the queries to average over: those that may attend something and (self-attention) are
    not padding, i.e. not a position that no query may attend."""
    if mask is None:
        return None
    rows = mask.any(axis=-1)
    return rows & mask.any(axis=0) if square else rows


def head_stats(trace: AttentionTrace, special: np.ndarray, hide_special: bool = False) -> HeadStats:
    """Every statistic of STATISTICS for every layer x head of `trace`.

    special: bool [key] (see `special_keys`). hide_special: drop the special keys, renormalise every row to
    sum 1 again, and leave the special queries out of the averages (their share of specials is then 0).
    Padding queries and rows that may attend nothing are left out; so are their weights in the pattern scores.
    One head at a time, so a long text holds one [query, key] map, not a layer of them.
    """
    special = np.asarray(special, bool)
    punct = punctuation_keys(trace)
    ids = trace.provenance.input_ids
    square = trace.n_tokens == trace.n_keys
    patterns = {"previous_score": previous_pattern(trace.n_tokens)} if square else {}
    if square and len(ids) == trace.n_tokens:
        patterns["duplicate_score"] = duplicate_pattern(ids)
    out = {k: np.zeros((trace.n_layer, trace.n_head)) for k in STATISTICS}
    for layer in range(trace.n_layer):
        rows = query_rows(trace.layer_mask(layer), square)
        rows = np.ones(trace.n_tokens, bool) if rows is None else rows
        if hide_special and square:
            rows = rows & ~special[: trace.n_tokens]
        for head in range(trace.n_head):
            w = np.asarray(trace.stages(layer, heads=head).weights, np.float64)  # [1, query, key]
            w = hide_keys(w, special) if hide_special else w
            values = layer_stats(w, rows, special, punct)
            kept = np.where(rows[:, None], w, 0.0)
            values |= {name: pattern_score(kept, p) for name, p in patterns.items()}
            for name, v in values.items():
                out[name][layer, head] = v[0]
    return HeadStats(out, bool(hide_special))


def induction_scores(trace: AttentionTrace) -> np.ndarray:
    """[layer, head] TransformerLens induction score of a trace of a repeated sequence (`repeated_random_text`)."""
    ids = trace.provenance.input_ids
    if len(ids) != trace.n_tokens:
        raise ValueError("an induction score needs the trace's input ids")
    pattern = induction_pattern(ids)
    return np.stack([pattern_score(trace.layer(i).weights, pattern) for i in range(trace.n_layer)])


def repeated_random_text(tokenizer, n: int = 20, seed: int = 0) -> str:
    """Text of `n` random vocabulary words, then the same `n` words again, each word exactly one token.

    An induction head, seeing the second copy, attends to the token after the earlier copy of the current one.
    Words are drawn from the tokenizer's vocabulary (alphabetic, no sub-word marker) and kept only if they
    tokenize back to themselves as a single token, so the repeat is exact in ids.
    """
    vocab = sorted(w for w in tokenizer.get_vocab() if w.isalpha() and w.isascii() and len(w) > 2)
    rng = np.random.default_rng(seed)
    words: list[str] = []
    for i in rng.permutation(len(vocab)):
        w = vocab[i]
        if len(tokenizer(w, add_special_tokens=False)["input_ids"]) == 1:
            words.append(w)
            if len(words) == n:
                break
    return " ".join(words + words)
