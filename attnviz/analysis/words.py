"""Word view: sub-word tokens merged back into whole words.

A tokenizer cuts rare words into pieces ("tired" -> "tire", "##d"); attention is between pieces. To read it
between words, the pieces of a word are merged:

- keys, **summed**: the attention a query gives a word is what it gives all of that word's pieces;
- queries, **averaged**: a word looks where its pieces look, on average.

So every merged row still sums to 1 (an average of rows that sum to 1), and M = P^T W S, with S [token, word]
the one-hot membership and P the same divided by each word's size.

A fast tokenizer says which word each piece belongs to (`BatchEncoding.word_ids()`), and a trace keeps that for its
queries and its keys: `trace_groups` uses it wherever the trace has it. A trace without it (given weights, an upload,
our module) falls back to the pieces' markers, which depend on the tokenizer's convention (`SCHEMES`):
- WordPiece (BERT): a piece starting with "##" continues the word before it;
- SentencePiece (T5, Llama, ALBERT): a piece starting with "▁" starts a word, the others continue it;
- byte-level BPE (GPT-2, RoBERTa): a piece starting with "Ġ" (an encoded space) or "Ċ" (a newline) starts a
  word, the others continue it.
Special tokens ([CLS], <s>, <|endoftext|>, padding) are words of their own, and the first piece after one
starts a word whatever its marker.
"""

from __future__ import annotations

import re

import numpy as np

from ..trace import AttentionTrace
from ..trace.window_cache import remembered

SCHEMES = {
    "wordpiece": "WordPiece: a piece starting with ## continues the word before it",
    "sentencepiece": "SentencePiece: a piece starting with ▁ starts a word; the others continue it",
    "bpe": "byte-level BPE: a piece starting with Ġ (a space) or Ċ (a newline) starts a word; the others continue it",
}
RULE = (
    "Pieces of one word are merged: attention **to** a word is the **sum** over its pieces (keys), attention "
    "**from** a word is the **mean** over its pieces (queries), so every row still sums to 1."
)
_SPECIAL = re.compile(r"^(\[[A-Z_]+\]|<[^<>\s]*>|<\|[^|]*\|>)$")  # [CLS], <s>, </s>, <pad>, <|endoftext|>
_STARTS = {"sentencepiece": ("▁",), "bpe": ("Ġ", "Ċ")}
_MARKS = {"wordpiece": "##", "sentencepiece": "▁", "bpe": "Ġ"}


def detect_scheme(tokens) -> str:
    """The convention the tokens follow, by their markers; WordPiece when none shows (every word one piece)."""
    tokens = [str(t) for t in tokens]
    if any(t.startswith("##") and len(t) > 2 for t in tokens):
        return "wordpiece"
    if any(t.startswith("▁") for t in tokens):
        return "sentencepiece"
    if any(t.startswith(("Ġ", "Ċ")) for t in tokens):
        return "bpe"
    return "wordpiece"


def looks_special(token: str) -> bool:
    """[CLS], [SEP], [PAD], <s>, </s>, <pad>, <|endoftext|> and the like, by their shape."""
    return bool(_SPECIAL.match(str(token)))


def _starts_word(token: str, scheme: str) -> bool:
    if scheme == "wordpiece":
        return not token.startswith("##")
    return token.startswith(_STARTS[scheme])


def word_groups(tokens, scheme: str | None = None, special=None) -> list[list[int]]:
    """Token positions grouped into words, in order: [[0], [1, 2], [3], ...].

    scheme: one of SCHEMES, or None to detect it. special: bool [token] (e.g. heads.special_keys), or None to
    recognise special tokens by their shape. Each special token is a group of its own.
    """
    tokens = [str(t) for t in tokens]
    scheme = detect_scheme(tokens) if scheme is None else scheme
    if scheme not in SCHEMES:
        raise ValueError(f"unknown sub-word scheme {scheme!r}; choose one of {', '.join(SCHEMES)}")
    special = [looks_special(t) for t in tokens] if special is None else [bool(s) for s in special]
    groups: list[list[int]] = []
    after_special = True
    for i, tok in enumerate(tokens):
        if special[i]:
            groups.append([i])
            after_special = True
            continue
        if after_special or _starts_word(tok, scheme):
            groups.append([i])
        else:
            groups[-1].append(i)
        after_special = False
    return groups


def groups_from_ids(word_ids, sequence_ids=None) -> list[list[int]]:
    """Token positions grouped by the tokenizer's own word ids: consecutive tokens of one word of one text form a
    group; a token with no word (special tokens, padding) is a group of its own."""
    sequence_ids = sequence_ids or (None,) * len(word_ids)
    groups: list[list[int]] = []
    last = None
    for i, (word, seq) in enumerate(zip(word_ids, sequence_ids)):
        key = None if word is None else (seq, word)
        if key is not None and key == last:
            groups[-1].append(i)
        else:
            groups.append([i])
        last = key
    return groups


def trace_groups(trace: AttentionTrace, scheme: str | None = None, special=None) -> tuple[list, list]:
    """(query groups, key groups) of a trace. scheme None: the tokenizer's word ids on each side that has them, else
    the markers' detected convention; a scheme of SCHEMES: its marker rules. special: bool [key] (heads.special_keys),
    used for the queries too in self-attention; cross-attention's queries are another text, recognised by shape."""

    def side(tokens, word_ids, sequence_ids, special):
        if scheme is None and word_ids is not None:
            return groups_from_ids(word_ids, sequence_ids)
        return word_groups(tokens, scheme, special)

    keys = side(trace.key_tokens, trace.key_word_ids, trace.key_sequence_ids, special)
    if trace.key_tokens == trace.tokens and trace.key_word_ids == trace.word_ids:
        return keys, keys
    return side(trace.tokens, trace.word_ids, trace.sequence_ids, None), keys


def word_labels(tokens, groups, scheme: str | None = None) -> list[str]:
    """One label per word: its pieces joined with their markers removed ("tire" + "##d" -> "tired")."""
    tokens = [str(t) for t in tokens]
    scheme = detect_scheme(tokens) if scheme is None else scheme
    mark = _MARKS[scheme]
    out = []
    for g in groups:
        pieces = [tokens[i] for i in g]
        if len(g) == 1 and looks_special(pieces[0]):
            out.append(pieces[0])
            continue
        pieces = [p.removeprefix(mark) for p in pieces] if scheme == "wordpiece" else pieces
        word = "".join(pieces)
        out.append(word.replace(mark, "") if scheme != "wordpiece" else word)
    return out


def membership(groups, n_tokens: int) -> np.ndarray:
    """S [token, word]: 1 where the token is a piece of the word."""
    s = np.zeros((n_tokens, len(groups)))
    for w, g in enumerate(groups):
        s[g, w] = 1.0
    return s


@remembered  # keyed by the weights' digest: a revisit hashes, never sums
def merge_words(weights: np.ndarray, groups, key_groups=None) -> np.ndarray:
    """weights [..., query, key] -> [..., query word, key word]: sum over a word's keys, mean over its queries.

    key_groups: the key side's groups when keys are other tokens (cross-attention); default `groups`.
    """
    w = np.asarray(weights, np.float64)
    key_groups = groups if key_groups is None else key_groups
    # sums over each group's positions, not products with membership matrices: those cost T³ (22 s at 2,048 tokens)
    sizes = np.array([len(g) for g in groups], dtype=np.float64)
    return _group_sums(_group_sums(w, key_groups, -1), groups, -2) / sizes[:, None]


def _group_sums(a: np.ndarray, groups, axis: int) -> np.ndarray:
    """Sum of `a` over each group's positions along `axis` (groups need not be contiguous or in order)."""
    order = np.concatenate([np.asarray(g, dtype=np.intp) for g in groups])
    starts = np.cumsum([0] + [len(g) for g in groups[:-1]])
    return np.add.reduceat(np.take(a, order, axis=axis), starts, axis=axis)


def word_position(groups, token: int | None) -> int | None:
    """The word that holds token position `token` (e.g. where sentence B starts, in word units); None stays None."""
    if token is None:
        return None
    for w, members in enumerate(groups):
        if token in members:
            return w
    return None
