"""Sentences of an exact token count (special tokens included), different for every seed."""

from __future__ import annotations

import random

# Common words that the bundled uncased WordPiece keeps whole; the count is checked, not assumed.
WORDS = (
    "the cat sat on mat a dog ran away because it was tired and then slept near warm fire while "
    "rain fell outside old house by river where children played games every summer before school "
    "started again teacher said that students should read more books about history science music "
    "art nature people city small green garden quiet morning light bright star over hill long road"
).split()


def make_text(tokenizer, n_tokens: int, seed: int = 0) -> str:
    """A sentence whose encoding (with [CLS]/[SEP] or the model's special tokens) is exactly n_tokens long."""
    rng = random.Random(seed)
    n_special = len(tokenizer("")["input_ids"])
    target = n_tokens - n_special
    if target < 1:
        raise ValueError(f"{n_tokens} tokens leaves no room for text next to {n_special} special tokens")
    words = [rng.choice(WORDS) for _ in range(target)]
    words[0] = words[0].capitalize()
    text = " ".join(words) + "."
    while True:
        n = len(tokenizer(text)["input_ids"])
        if n == n_tokens:
            return text
        if n > n_tokens:
            words.pop()
        else:
            words.append(rng.choice(WORDS))
        text = " ".join(words) + "."
