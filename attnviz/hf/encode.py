"""Text -> the tensors a model takes, with the tokens shown on every axis."""

from __future__ import annotations

import inspect
from dataclasses import dataclass

import torch

from .. import checks
from ..errors import InputError

#: Characters tokenized per token of the limit. A text is cut to `limit` x this before the tokenizer sees it, so a
#: megabyte pasted or linked costs milliseconds; real text runs 3-6 characters a token, so nothing that fits is lost.
CHARS_PER_TOKEN = 40


def token_limit(most: int, asked=None) -> int:
    """The most tokens a text is cut to: `asked` (None: `most`) within 2..most (the model's positions, a server's
    cap). Two tokens at least: a single one attends only to itself. `asked` is the caller's max_tokens, checked."""
    asked = checks.whole("max_tokens", asked, low=1, high=checks.MAX_TOKENS, none=True)
    return most if asked is None else max(2, min(asked, most))


@dataclass(frozen=True)
class Encoded:
    inputs: dict  # tensors for the model, batch of one
    tokens: list[str]
    ids: list[int]
    n_dropped: int  # tokens cut off at the limit
    pad_keys: torch.Tensor | None  # [T] bool, True at padding positions
    notes: list[str]
    text: str = ""  # the text and second sentence as tokenized (cut to char_limit)
    pair: str | None = None
    word_ids: tuple | None = None  # the tokenizer's word of each token (None: special tokens, padding)
    sequence_ids: tuple | None = None  # 0: the text, 1: the second sentence, None: special tokens, padding


def char_limit(limit: int) -> int:
    """The most characters of a text (and, separately, of its second sentence) tokenized for a `limit`-token trace."""
    return CHARS_PER_TOKEN * max(int(limit), 1)


def cut_text(text: str, limit: int, what: str = "The text") -> tuple[str, list[str]]:
    """(`text` cut to char_limit(limit), a note when it was cut): bounds the tokenizer's work before it starts."""
    most = char_limit(limit)
    if len(text) <= most:
        return text, []
    return text[:most], [f"{what} was {len(text):,} characters; only the first {most:,} were tokenized."]


def token_facts(enc) -> tuple[tuple | None, tuple | None]:
    """(word ids, sequence ids) the tokenizer gave this encoding; (None, None) for a tokenizer without them (a slow
    tokenizer keeps no alignment: pages then fall back to the tokens' markers)."""
    try:
        return tuple(enc.word_ids()), tuple(enc.sequence_ids())
    except (ValueError, AttributeError, TypeError):
        return None, None


def encode(tokenizer, text, pair=None, limit: int = 512, pad_to: int | None = None) -> Encoded:
    """Tokenize `text` (and an optional second sentence) for a model, truncated to `limit` tokens.

    Each of the two is first cut to `char_limit(limit)` characters (a note says so), so no input makes the
    tokenizer work on more than that.

    Typed special tokens ("[SEP]", "<|endoftext|>") are split as text, never read as control tokens.
    `pad_to` appends padding tokens (with an attention_mask of 0) as in a batch.
    """
    if not checks.text("text", text).strip():
        raise InputError("The text is empty: type a sentence to see its attention.")
    text, notes = cut_text(text, limit)
    pair = pair if checks.text("pair", pair, none=True) is not None and pair.strip() else None
    if pair is not None:
        pair, cut = cut_text(pair, limit, "The second sentence")
        notes += cut
    kw = dict(split_special_tokens=True, add_special_tokens=True, verbose=False)
    full = tokenizer(text, pair, **kw)
    enc, n_dropped = full, 0
    if len(full["input_ids"]) > limit:
        enc = tokenizer(text, pair, truncation=True, max_length=limit, **kw)
        n_dropped = len(full["input_ids"]) - len(enc["input_ids"])
        notes.append(
            f"The text was {len(full['input_ids'])} tokens; kept the first {len(enc['input_ids'])} "
            f"(the limit is {limit})."
        )
    ids = list(enc["input_ids"])
    if not ids:
        raise InputError("The tokenizer produced no tokens for this text.")
    types = list(enc["token_type_ids"]) if "token_type_ids" in enc else None
    n_pad = 0
    pad_to = checks.whole("pad_to", pad_to, low=1, high=checks.MAX_TOKENS, none=True)
    if pad_to is not None and pad_to > len(ids):
        target = min(pad_to, limit)
        if target < pad_to:
            notes.append(f"Padding capped at the model's limit of {limit} tokens.")
        n_pad = target - len(ids)
    return _assemble(tokenizer, ids, types, n_pad, n_dropped, notes, (text, pair), token_facts(enc))


def _assemble(tokenizer, ids, types, n_pad, n_dropped, notes, texts, facts) -> Encoded:
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else (tokenizer.eos_token_id or 0)
    real = len(ids)
    ids = ids + [pad_id] * n_pad
    tokens = [str(t) for t in tokenizer.convert_ids_to_tokens(ids)]
    tokens[real:] = [tokenizer.pad_token or "[PAD]"] * n_pad
    inputs = {"input_ids": torch.tensor([ids]), "attention_mask": torch.tensor([[1] * real + [0] * n_pad])}
    if types is not None:
        inputs["token_type_ids"] = torch.tensor([types + [0] * n_pad])
    pad_keys = torch.arange(len(ids)) >= real if n_pad else None
    word_ids, sequence_ids = (None if f is None else f + (None,) * n_pad for f in facts)
    return Encoded(inputs, tokens, ids, n_dropped, pad_keys, notes, *texts, word_ids, sequence_ids)


def forward_inputs(model) -> frozenset | None:
    """The parameters `model.forward` names, which the encoded inputs are filtered by; None when it names no
    input_ids (a wrapper taking **kwargs), so that nothing is dropped from a forward that cannot be read."""
    params = inspect.signature(model.forward).parameters
    named = frozenset(k for k, p in params.items() if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD))
    return named if "input_ids" in named else None
