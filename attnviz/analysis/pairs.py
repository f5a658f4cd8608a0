"""Sentence pairs: where sentence A ends, and how much attention stays inside each sentence or crosses over.

A trace keeps the tokenizer's sequence ids where the tokenizer gives them (`BatchEncoding.sequence_ids()`): sentence
B starts at the first token of the second sequence (`sequence_start`). For BERT, [CLS] A [SEP] B [SEP]: A is [CLS] ..
the first [SEP] (the segment the model gives token type 0), B the rest with its final [SEP]; RoBERTa's
<s> A </s></s> B </s> puts both middle </s> in A; GPT-2 joins the two texts with no separator at all. A trace without
sequence ids (an upload, given weights) falls back to the tokens: sentence B starts right after the first run of
separator tokens that follows sentence A (`segment_boundary`), or, with no separator, after as many tokens as
sentence A alone gives (`boundary_from_count`).

`block_shares` splits each head's attention into four blocks, X->Y = the mean over queries in X of the weight
they give to keys in Y (so A->A + A->B = 1 and B->A + B->B = 1 for rows that sum to 1), and the crossing
share: of all the attention the real (not padding) queries give, the fraction that goes to the other sentence.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..errors import InputError
from ..trace import AttentionTrace
from ..trace.window_cache import remembered

SEPARATORS = ("[SEP]", "</s>", "<|endoftext|>", "<eos>", "<sep>", "<|eot_id|>")
BLOCKS = ("A->A", "A->B", "B->A", "B->B")


def pair_text(trace: AttentionTrace) -> str | None:
    """The second sentence the trace was made with (its options), or None."""
    return dict(trace.options).get("pair") or None


def segment_boundary(tokens, separators=SEPARATORS) -> int | None:
    """The first position of sentence B: after the first run of separators that follows at least one other token.

    None when no separator has a token after it (a single sentence, or a pair joined without separators).
    """
    tokens = [str(t) for t in tokens]
    for i in range(1, len(tokens)):
        if tokens[i] in separators:
            j = i
            while j < len(tokens) and tokens[j] in separators:
                j += 1
            return j if j < len(tokens) else None
    return None


def boundary_from_count(n_first: int, n_tokens: int) -> int:
    """The boundary when sentence A is known to be `n_first` tokens long (e.g. counted by re-tokenizing it)."""
    if not 0 < n_first < n_tokens:
        raise InputError(f"Sentence A of {n_first} tokens leaves no sentence B in {n_tokens} tokens.")
    return int(n_first)


SEQUENCE_RULE = "sentence B starts where the tokenizer's sequence ids say the second text starts"
SEPARATOR_RULE = "sentence B starts after the first separator token(s) that follow sentence A"
COUNT_RULE = "sentence B starts after as many tokens as sentence A alone gives (this tokenizer adds no separator)"


def sequence_start(trace: AttentionTrace) -> int | None:
    """The first position the tokenizer gave sequence id 1 (the second text of a pair); None without one."""
    ids = trace.sequence_ids or ()
    return next((i for i, s in enumerate(ids) if s == 1), None)


def pair_boundary(trace: AttentionTrace, n_first: int | Callable[[], int] | None = None) -> tuple[int | None, str]:
    """(first position of sentence B, the rule that found it) for a trace made with a second sentence.

    (None, reason) when the trace has no pair or is not self-attention over the pair (cross-attention). The
    tokenizer's sequence ids decide when the trace has them; otherwise separators, when the tokenizer puts them
    between the sentences; otherwise `n_first`, sentence A's own token count (tokenize it alone), and InputError says
    when that count leaves no sentence B. `n_first` may be a function giving that count: it is called only when
    nothing else decides, so most tokenizers never tokenize sentence A a second time.
    """
    if pair_text(trace) is None:
        return None, "no second sentence"
    if trace.key_tokens != trace.tokens:
        return None, "queries and keys come from different texts (cross-attention)"
    found = sequence_start(trace)
    if found is not None:
        return found, SEQUENCE_RULE
    found = segment_boundary(trace.tokens)
    if found is not None:
        return found, SEPARATOR_RULE
    if n_first is None:
        return None, "the tokenizer adds no separator and sentence A's length is unknown"
    return boundary_from_count(n_first() if callable(n_first) else n_first, trace.n_tokens), COUNT_RULE


def real_length(mask: np.ndarray | None, n_tokens: int) -> int:
    """Tokens before any trailing padding: the last key that some query may attend, plus one."""
    if mask is None:
        return n_tokens
    seen = np.flatnonzero(np.asarray(mask, bool).any(axis=0))
    return int(seen[-1]) + 1 if seen.size else n_tokens


@remembered  # keyed by the weights' digest
def block_shares(weights: np.ndarray, boundary: int, end: int | None = None) -> dict:
    """Per head: the four blocks' mean row shares and the crossing share. weights [head, query, key].

    Tokens 0..boundary-1 are sentence A, boundary..end-1 sentence B; positions from `end` on (padding) are left
    out as queries and as keys. Returns {"A->A": [head], ..., "crossing": [head]}.
    """
    w = np.asarray(weights, np.float64)
    end = w.shape[-1] if end is None else int(end)
    if not 0 < boundary < end:
        raise InputError(f"The boundary {boundary} must fall inside the {end} tokens of the pair.")
    a, b = slice(0, boundary), slice(boundary, end)
    out = {}
    for name, (rows, cols) in zip(BLOCKS, [(a, a), (a, b), (b, a), (b, b)]):
        out[name] = w[:, rows, cols].sum(axis=-1).mean(axis=-1)
    n_a, n_b = boundary, end - boundary
    out["crossing"] = (out["A->B"] * n_a + out["B->A"] * n_b) / (n_a + n_b)
    return out
