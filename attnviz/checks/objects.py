"""Checks of the arguments that are things rather than numbers: models, tokenizers, paths, callbacks, head lists,
a target token and keyword settings with documented bounds. Like the rest of attnviz.checks, each raises an
`ArgumentTypeError` for a wrong type and an `ArgumentError` for a value it cannot take, naming the argument; the
types a model must have are given by the caller (this package imports only `errors`).

| setting of attnviz.profile | bounds      | why                                                                   |
|----------------------------|-------------|-----------------------------------------------------------------------|
| max_tokens                 | 2..131,072  | positions of one text (MAX_TOKENS)                                     |
| shard_size                 | 1..1,000,000| texts per shard (the corpus's own limit on texts)                      |
| batch, batch_tokens        | 1..4,096, 1..2^20 | texts and padded tokens a forward (a batch's window is CELLS besides) |
| bins                       | 1..1,000    | the histogram of each row's largest weight: layer x head x bins       |
| top, intervals, per_interval | 1..100, 1..20, 1..20 | examples kept per head (top + intervals x per_interval rows)  |
| example_keys               | 1..64       | keys stored with each example: at most 500 x 64 per head              |
| seed                       | 0..2^62     |                                                                        |
"""

from __future__ import annotations

import itertools
import os

from ..errors import ArgumentError, ArgumentTypeError, check_index, kind_of, whole_number
from . import choice, flag, keywords, shown, text, whole

#: Keyword settings of attnviz.profile: (low, high) for whole numbers, bool for a flag.
PROFILE_SETTINGS = {
    "max_tokens": (2, 131_072),
    "shard_size": (1, 1_000_000),
    "batch": (1, 4_096),  # texts a forward (1: one at a time)
    "batch_tokens": (1, 1 << 20),  # padded tokens a forward
    "bins": (1, 1_000),
    "top": (1, 100),
    "intervals": (1, 20),
    "per_interval": (1, 20),
    "example_keys": (1, 64),
    "seed": (0, 2**62),
    "distances": bool,
    "qk_samples": (0, 5_000),  # tokens whose query and key every head keeps (0: none)
    "qk_per_text": (1, 512),
    "qk_dtype": ("float16", "float32"),
    "distance_rows": (0, 131_072),  # rows per text the head distances are averaged over (0: every row)
    "part": ("encoder", "decoder", "cross", None),  # an encoder-decoder's attention; None: a model without parts
}


def instance(name: str, value, types, what: str, *, none: bool = False):
    """`value` if it is one of `types` (a type or a tuple), else an ArgumentTypeError: '{name} must be {what}'."""
    if value is None and none:
        return None
    if not isinstance(value, types):
        raise ArgumentTypeError(name, f"{name} must be {what}, not {kind_of(value)}.")
    return value


def path(name: str, value, *, none: bool = False):
    """A file system path: a str (valid Unicode text) or an os.PathLike; bytes paths are not taken."""
    if value is None and none:
        return None
    if isinstance(value, str):
        return text(name, value)
    if isinstance(value, os.PathLike) and isinstance(os.fspath(value), str):
        text(name, os.fspath(value))
        return value
    raise ArgumentTypeError(name, f"{name} must be a path (a str or a pathlib.Path), not {kind_of(value)}.")


def function(name: str, value, *, none: bool = False):
    """Something to call (a function, a method, a callable object)."""
    if value is None and none:
        return None
    if not callable(value) or isinstance(value, type):
        raise ArgumentTypeError(name, f"{name} must be a function to call, not {kind_of(value)}.")
    return value


def head_pairs(name: str, value, n_layer: int, n_head: int, most: int) -> tuple[tuple[int, int], ...]:
    """(layer, head) pairs as sorted unique pairs, each checked against the model; one pair may come without its
    list. More than `most` entries are refused without reading them all."""
    if isinstance(value, tuple) and len(value) == 2 and all(isinstance(x, int) for x in value):
        value = [value]  # one (layer, head) pair given without the list around it
    if isinstance(value, (str, bytes)) or not hasattr(value, "__iter__"):
        raise ArgumentTypeError(
            name, f"{name} must be a list of (layer, head) pairs, such as [(0, 1), (2, 3)]; not {kind_of(value)}."
        )
    pairs = list(itertools.islice(iter(value), most + 1))
    if not pairs:
        raise ArgumentError(name, f"{name}: choose at least one head to remove, as (layer, head).")
    if len(pairs) > most:
        raise ArgumentError(name, f"{name}: more than {most} heads asked for; remove at most {most} at once.")
    out = set()
    for pair in pairs:
        if isinstance(pair, (str, bytes)) or not isinstance(pair, (tuple, list)) or len(pair) != 2:
            raise ArgumentError(name, f"{name}: each head is a (layer, head) pair, such as (0, 1); got {shown(pair)}.")
        try:
            out.add((check_index("layer", pair[0], n_layer), check_index("head", pair[1], n_head)))
        except ArgumentError as e:
            raise type(e)(name, f"{name}: {e}") from None
    return tuple(sorted(out))


def target(name: str, value, most: int = 100):
    """A token to follow: None, a token id (a whole number, its range the vocabulary's, checked by the caller) or
    a str of at most `most` characters."""
    if value is None:
        return None
    if isinstance(value, str):
        if len(value) > most:
            raise ArgumentError(name, f"{name} is a token: at most {most} characters, got {len(value):,}.")
        return text(name, value)
    return whole_number(name, value)  # a bool, a float or NaN: a wrong type


def settings(label: str, given: dict, bounds: dict = PROFILE_SETTINGS) -> None:
    """Keyword settings: an unknown one is an ArgumentTypeError naming it (attnviz.checks.keywords); each known
    one a whole number within its (low, high), a flag, or one of a tuple of strings (None too where it is one)."""
    keywords(label, given, list(bounds))
    for key, value in given.items():
        if bounds[key] is bool:
            flag(key, value)
        elif all(isinstance(option, str) or option is None for option in bounds[key]):
            if value is not None or None not in bounds[key]:
                choice(key, value, tuple(option for option in bounds[key] if option is not None))
        else:
            low, high = bounds[key]
            whole(key, value, low=low, high=high)


def profile_call(model, corpus, out, column, engine, progress, max_shards, limits, workers, given, types) -> None:
    """attnviz.profile's arguments, before a model is loaded or a text read. `types`: the classes a model, a checked
    corpus and corpus limits are (model=, corpus=, limits=), which this package does not import."""
    instance("model", model, (str, types["model"]), "a model from attnviz.load_model(), a hub id or a folder")
    if isinstance(model, str):
        text("model", model)
    if isinstance(corpus, (list, tuple)):
        wrong = next((t for t in corpus if not isinstance(t, str)), None)
        if wrong is not None:
            raise ArgumentTypeError("corpus", f"corpus must be a list of str texts; it holds {kind_of(wrong)}.")
    elif not isinstance(corpus, types["corpus"]):
        path("corpus", corpus, none=True)
    path("out", out, none=True)
    text("column", column)
    choice("engine", engine, ("local", "ray"))
    function("progress", progress, none=True)
    whole("max_shards", max_shards, low=0, high=2**31, none=True)
    instance("limits", limits, types["limits"], "attnviz.corpus.texts.Limits")
    whole("workers", workers, low=1, high=1_024)
    settings("attnviz.profile", given)
