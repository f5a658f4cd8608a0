"""What each head looks at, as one number per layer x head (the Head statistics page).

Two families of numbers, both computed from a head's weights [query, key]:

- Clark et al. 2019, "What Does BERT Look At?": how spread out a head is (entropy), how far it looks
  (mean distance), and how much of its attention goes to special tokens, punctuation, the previous
  token, the next token and the token itself. Each is averaged over the query rows that may attend;
  padding is left out entirely (no padded query row in a mean, no pad as anyone's neighbour), as their
  code does by cutting each map to the sentence's own tokens. Where attnviz differs from their notebook
  (github clarkkev/attention-analysis, General_Analysis.ipynb), on purpose (CLARK_DIFFERENCES):
  "special" is [CLS] + [SEP] + the model's own BOS/EOS/PAD in one number (never [UNK] or [MASK], which stand
  for words); punctuation is any token made of Unicode punctuation (theirs: "." and "," only); previous
  and next are averaged over the queries that have such a neighbour (n - 1 of n; theirs divide by n);
  entropy is exact with 0 log 0 = 0 (theirs smooths each row to 0.9999 A + 0.0001 / n first).
- TransformerLens's head detectors (transformer_lens/head_detector.py, "mul" measure): a 0/1 detection
  pattern P over (query, key) says where a previous-token, duplicate-token or induction head would look;
  the score is the share of the head's whole attention that falls on P, sum(A * P) / sum(A).
  previous-token: P[i, i-1] = 1. duplicate-token: P[i, j] = 1 where j < i holds the same token id as i.
  induction: P[i, j] = 1 where j <= i and token j-1 equals token i (the token after an earlier copy of
  the current one), i.e. the duplicate pattern moved one key to the right with its first column cleared.
  TransformerLens scores induction on a random token sequence repeated twice: `repeated_random_text`.
  TransformerLens knows no padding; here padded query rows are left out of both sums and pad keys hold no
  pattern cell, so a padded trace scores what the sentence alone scores.
"""

from __future__ import annotations

import functools
import unicodedata
from dataclasses import dataclass

import numpy as np

from ..trace import AttentionTrace
from ..trace.window_cache import remembered

#: Statistic id -> (label, what it means, colour range or None for 0..max). Shares and scores lie in 0..1.
STATISTICS = {
    "entropy": ("entropy (nats)", "how spread out each row is: 0 = one key, log(n) = uniform", None),
    "distance": ("mean distance (tokens)", "how far from the query the attention lands, on average", None),
    "special": ("to special tokens", "share of attention on [CLS], [SEP], BOS/EOS/PAD (not [UNK])", (0.0, 1.0)),
    "punctuation": ("to punctuation", "share of attention on punctuation tokens", (0.0, 1.0)),
    "previous": ("to previous token", "share on the token just before the query (queries that have one)", (0.0, 1.0)),
    "next": ("to next token", "share on the token just after the query (queries that have one)", (0.0, 1.0)),
    "self": ("to itself", "share of attention the query keeps on its own token", (0.0, 1.0)),
    "previous_score": ("previous-token score", "TransformerLens: sum(A * P_prev) / sum(A)", (0.0, 1.0)),
    "duplicate_score": ("duplicate-token score", "TransformerLens: share on earlier copies of the token", (0.0, 1.0)),
}
INDUCTION = ("induction score", "TransformerLens: share on the token after an earlier copy (repeated text)", (0.0, 1.0))
CLARK = ("entropy", "distance", "special", "punctuation", "previous", "next", "self")
WORD_MARKS = ("##", "Ġ", "▁", "Ċ")  # sub-word markers stripped before deciding whether a token is punctuation
#: The tokens "special" counts, by the tokenizer's role names: Clark et al.'s [CLS] and [SEP], and the model's own
#: begin / end / padding tokens. Not unk or mask: they stand in for words of the text.
SPECIAL_ROLES = ("cls", "sep", "bos", "eos", "pad")
#: Where these numbers deliberately differ from Clark et al.'s notebook: the page prints this.
CLARK_DIFFERENCES = (
    "**special** counts [CLS], [SEP] and the model's own BOS / EOS / padding token together (Clark et al. show "
    "[CLS] and [SEP] apart; [UNK] and [MASK] stand for words and count as ordinary tokens); **punctuation** is any "
    "token made only of punctuation characters (theirs: `.` and `,` only); **previous / next** are averaged over "
    "the queries that have such a neighbour, n − 1 of n (theirs divide by n, so theirs are (n − 1) / n of ours); "
    "**entropy** is exact with 0·log 0 = 0 (theirs first smooths each row to 0.9999·A + 0.0001 / n). Padding never "
    "counts: padded queries are left out of every mean and a pad is nobody's neighbour."
)


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
    return _is_punctuation(str(token))


@functools.lru_cache(maxsize=1 << 16)  # a vocabulary's tokens: a profile asks about the same few thousand again
def _is_punctuation(text: str) -> bool:
    for mark in WORD_MARKS:
        text = text.replace(mark, "")
    text = text.strip()
    return bool(text) and all(unicodedata.category(c).startswith("P") for c in text)


def special_tokens_of(tokenizer) -> tuple[tuple[int, ...], tuple[str, ...]]:
    """(ids, strings) of the tokens the "special" statistic counts (SPECIAL_ROLES), for `special_keys`.

    Not the tokenizer's `all_special_ids`: that list holds [UNK] too, and an emoji or a rare word becomes [UNK].
    """
    ids = {getattr(tokenizer, f"{role}_token_id", None) for role in SPECIAL_ROLES}
    names = {getattr(tokenizer, f"{role}_token", None) for role in SPECIAL_ROLES}
    return tuple(sorted(int(i) for i in ids if isinstance(i, int))), tuple(sorted(str(n) for n in names if n))


def special_keys(trace: AttentionTrace, special_ids=(), special_tokens=()) -> np.ndarray:
    """bool [key]: positions holding a special token, by id (trace.provenance.input_ids) or else by token text.

    Pass `special_tokens_of(tokenizer)`; a trace without input ids (our module on random vectors still has the
    tokens) falls back to matching the token strings.
    """
    return special_positions(trace.provenance.input_ids, trace.key_tokens, special_ids, special_tokens)


def special_positions(ids, tokens, special_ids=(), special_tokens=()) -> np.ndarray:
    """bool [key]: `special_keys` of a text known by its input ids and its tokens (texts read together, no trace)."""
    if len(ids) == len(tokens) and len(special_ids):
        return np.isin(np.asarray(ids), np.asarray(list(special_ids)))
    names = set(map(str, special_tokens))
    return np.array([t in names for t in tokens], dtype=bool)


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


def layer_stats(weights: np.ndarray, rows: np.ndarray, special: np.ndarray, punct: np.ndarray, keys=None) -> dict:
    """Clark-style statistics of one layer: weights [head, query, key]; rows bool [query] to average over;
    keys bool [key]: the keys that may be a neighbour (default all). `head_stats`' sums, over one block of every row."""
    w = np.asarray(weights, np.float64)
    sums = _Sums(w.shape[0], np.asarray(rows, bool), _every_key(w, keys), special, punct, {})
    sums.add(0, w)
    return sums.result()


def _every_key(w: np.ndarray, keys) -> np.ndarray:
    return np.ones(w.shape[-1], bool) if keys is None else np.asarray(keys, bool)


def query_rows(mask: np.ndarray | None, square: bool) -> np.ndarray | None:
    """bool [query]: the queries to average over: those that may attend something and (self-attention) are
    not padding, i.e. not a position that no query may attend."""
    if mask is None:
        return None
    rows = mask.any(axis=-1)
    return rows & mask.any(axis=0) if square else rows


def live_keys(mask: np.ndarray | None, n_keys: int) -> np.ndarray:
    """bool [key]: the keys some query may attend, i.e. not padding (every key when the trace has no mask)."""
    return np.ones(n_keys, bool) if mask is None else np.asarray(mask, bool).any(axis=0)


def left_out_keys(n_keys: int, special: np.ndarray | None = None, keys=()) -> np.ndarray:
    """bool [key]: the keys a statistic leaves out, `special` (bool [key] or None) and the positions `keys` (e.g. (0,),
    a first-token sink, as HeadVis leaves position 0 out of its ranking)."""
    out = np.zeros(n_keys, bool) if special is None else np.asarray(special, bool).copy()
    out[[k for k in keys if 0 <= k < n_keys]] = True
    return out


@remembered
def head_stats(trace: AttentionTrace, special: np.ndarray, hide_special: bool = False, leave_out=()) -> HeadStats:
    """Every statistic of STATISTICS for every layer x head of `trace`.

    special: bool [key] (see `special_keys`). hide_special: drop the special keys, renormalise every row to
    sum 1 again, and leave the special queries out of the averages (their share of specials is then 0).
    leave_out: key positions dropped the same way (e.g. (0,): the first token, often an attention sink).
    Padding queries and rows that may attend nothing are left out of every mean and of the pattern scores'
    sums; a pad key is nobody's previous or next token.
    Heads are read in groups (`head_groups`), so a long text holds one [query, key] map, not a layer of them.
    """
    special = np.asarray(special, bool)
    punct = punctuation_keys(trace)
    ids = trace.provenance.input_ids
    square = trace.n_tokens == trace.n_keys
    patterns = {"previous_score": previous_pattern(trace.n_tokens)} if square else {}
    if square and len(ids) == trace.n_tokens:
        patterns["duplicate_score"] = duplicate_pattern(ids)
    out = {k: np.zeros((trace.n_layer, trace.n_head)) for k in STATISTICS}
    hidden = left_out_keys(trace.n_keys, special if hide_special else None, leave_out)
    for layer in range(trace.n_layer):
        mask = trace.layer_mask(layer)
        rows, keys = query_rows(mask, square), live_keys(mask, trace.n_keys)
        rows = np.ones(trace.n_tokens, bool) if rows is None else rows
        if square:
            rows = rows & ~hidden[: trace.n_tokens]
        for heads in head_groups(trace.n_head, trace.n_tokens * trace.n_keys):
            weights = trace.stages(layer, heads=heads).weights  # float32 [len(heads), query, key]: one read
            sums = _Sums(len(heads), rows, keys, special, punct, patterns)
            step = max(1, BLOCK_CELLS // (len(heads) * trace.n_keys))  # query rows summed at once
            for a in range(0, trace.n_tokens, step):
                w = np.asarray(weights[:, a : a + step], np.float64)
                sums.add(a, hide_keys(w, hidden) if hidden.any() else w)
            for name, v in sums.result().items():
                out[name][layer, heads] = v
    return HeadStats(out, bool(hidden.any()))


#: [head, query, key] cells of one block of query rows summed at once: 1 MB of float64, kept in the cache. The weights
#: are read from the trace a head group at a time all the same: many small torch calls (a read per block) were 15x
#: slower on a busy 2-core host, where each parallel op waits for its other thread.
BLOCK_CELLS = 1 << 17


class _Sums:
    """What `layer_stats` and `pattern_score` average, summed a block of query rows at a time (every key of them):
    the same numbers without a [query, key] float64 map per head, whose copies made a long text's statistics slow."""

    def __init__(self, n_head: int, rows, keys, special, punct, patterns: dict):
        self.rows, self.keys, self.special, self.punct, self.patterns = rows, keys, special, punct, patterns
        self.n_rows = 0
        self.clark = {k: np.zeros(n_head) for k in ("entropy", "distance", "special", "punctuation")}
        self.near = {k: [np.zeros(n_head), 0] for k in ((-1, "previous"), (1, "next"), (0, "self"))}
        self.hit, self.total = {name: np.zeros(n_head) for name in patterns}, np.zeros(n_head)

    def add(self, a: int, w: np.ndarray) -> None:
        """Queries a.. of every head: w float64 [head, query, key]."""
        chosen = self.rows[a : a + w.shape[1]]
        i = np.flatnonzero(chosen)
        sel = w[:, i]  # [head, chosen query, key]
        self.n_rows += i.size
        self.clark["entropy"] -= (sel * np.log(np.where(sel > 0, sel, 1.0))).sum(axis=(-2, -1))
        self.clark["distance"] += (sel * np.abs((i + a)[:, None] - np.arange(w.shape[-1]))).sum(axis=(-2, -1))
        self.clark["special"] += sel[..., self.special].sum(axis=(-2, -1))
        self.clark["punctuation"] += sel[..., self.punct].sum(axis=(-2, -1))
        for (offset, _), acc in self.near.items():  # the rows whose neighbour is a counted key
            j = i + a + offset
            ok = (j >= 0) & (j < w.shape[-1])
            ok[ok] &= self.keys[j[ok]]
            acc[0] += w[:, i[ok], j[ok]].sum(axis=-1)
            acc[1] += int(ok.sum())
        kept = np.where(chosen[:, None] & self.keys[None, :], w, 0.0)  # as head_stats' pattern scores read them
        self.total += kept.sum(axis=(-2, -1))
        for name, p in self.patterns.items():
            self.hit[name] += kept[..., p[a : a + w.shape[1]]].sum(axis=-1)

    def result(self) -> dict:
        zero = np.zeros_like(self.total)
        out = {k: v / self.n_rows if self.n_rows else zero for k, v in self.clark.items()}
        out |= {name: acc[0] / acc[1] if acc[1] and self.n_rows else zero for (_, name), acc in self.near.items()}
        ratio = {
            name: np.divide(h, self.total, out=np.zeros_like(h), where=self.total > 0) for name, h in self.hit.items()
        }
        return out | ratio


STATS_CELLS = 1 << 20  # [head, query, key] cells read at once: a few float64 copies of 8 MB each


def head_groups(n_head: int, cells_per_head: int) -> list[list[int]]:
    """The heads of a layer in groups of at most STATS_CELLS cells: a short text reads its whole layer in one call
    (each call recomputes the stages, so one per head was the page's main cost), a long text one head at a time."""
    size = max(1, min(n_head, STATS_CELLS // max(1, cells_per_head)))
    return [list(range(a, min(n_head, a + size))) for a in range(0, n_head, size)]


def induction_scores(trace: AttentionTrace, leave_out=()) -> np.ndarray:
    """[layer, head] TransformerLens induction score of a trace of a repeated sequence (`repeated_random_text`).

    Padded query rows and pad keys are left out of both sums (TransformerLens traces one unpadded sequence);
    `leave_out` key positions are dropped and every row renormalised over the others (their own rows left out)."""
    ids = trace.provenance.input_ids
    if len(ids) != trace.n_tokens:
        raise ValueError("an induction score needs the trace's input ids")
    pattern, hidden = induction_pattern(ids), left_out_keys(trace.n_keys, None, leave_out)
    out = []
    for layer in range(trace.n_layer):
        mask = trace.layer_mask(layer)
        rows = query_rows(mask, True)
        rows = (np.ones(trace.n_tokens, bool) if rows is None else rows) & ~hidden
        keep = rows[:, None] & live_keys(mask, trace.n_keys)[None, :]
        w = trace.layer(layer).weights
        out.append(pattern_score(np.where(keep, hide_keys(w, hidden) if hidden.any() else w, 0.0), pattern))
    return np.stack(out)


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
