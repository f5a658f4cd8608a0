"""Arguments of the public API checked before any work: types, NaN and infinities, ranks, ranges and sizes.

Every entry point (attnviz.trace, the trace's reads, MultiHeadAttention, the masks, the export and analysis
functions) checks what it is given with these helpers, so a bad value is refused the same way everywhere: an
`ArgumentTypeError` (also a TypeError) for a wrong type, an `ArgumentError` (also a ValueError) for a value it
cannot take, each naming the argument. Sizes are bounded by the documented limits below, so no argument can make
torch allocate more than they allow.

| limit       | value       | bounds                                                                       |
|-------------|-------------|------------------------------------------------------------------------------|
| MAX_TOKENS  | 131,072     | positions on one axis: tokens, queries, keys, vectors, masks                  |
| MAX_WIDTH   | 8,192       | our module's d_model and score hidden size (4 x 8,192^2 weights: 1 GiB)       |
| MAX_HEADS   | 1,024       | our module's heads                                                            |
| MAX_CELLS   | 2^30        | elements of one array built on request (a mask: 1 GiB of bool, 32,768^2)      |
"""

from __future__ import annotations

import difflib
import functools
import inspect
import itertools
import math
import numbers

import numpy as np
import torch

from ..errors import ArgumentError, ArgumentTypeError, check_index, kind_of, whole_number

MAX_TOKENS = 131_072
MAX_WIDTH = 8_192
MAX_HEADS = 1_024
MAX_CELLS = 2**30

__all__ = [
    "ArgumentError",
    "ArgumentTypeError",
    "MAX_CELLS",
    "MAX_HEADS",
    "MAX_TOKENS",
    "MAX_WIDTH",
    "array",
    "cells",
    "check_index",
    "choice",
    "fits",
    "flag",
    "keywords",
    "lengths",
    "number",
    "positions",
    "public",
    "sizes",
    "text",
    "tokens",
    "whole",
    "window",
]


def shown(value) -> str:
    """A value for a message, short whatever it is (a 10**5000 int cannot even be printed)."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**15:
        return f"{'-' if value < 0 else ''}about 2**{abs(value).bit_length() - 1}"
    text = repr(value) if isinstance(value, (int, float, str, np.number)) else kind_of(value)
    return text if len(text) <= 60 else text[:57] + "..."


def whole(name: str, value, *, low: int | None = None, high: int | None = None, none: bool = False) -> int | None:
    """A whole number (int, numpy or one-element torch integer; never a bool or a float) in low..high."""
    if value is None and none:
        return None
    v = whole_number(name, value)
    if low is not None and v < low:
        least = "positive" if low == 1 else f"at least {low:,}"
        raise ArgumentError(name, f"{name} must be {least}, got {shown(v)}.")
    if high is not None and v > high:
        raise ArgumentError(name, f"{name} must be at most {high:,}, got {shown(v)}.")
    return v


def number(
    name: str, value, *, none: bool = False, low=None, high=None, nonzero: bool = False, minus_inf: bool = False
) -> float | None:
    """A real number (int, float, numpy, one-element tensor; not a bool), never NaN, finite unless `minus_inf`
    allows -inf, with |value| <= `high` when given and value >= `low` when given."""
    if value is None and none:
        return None
    if isinstance(value, np.ndarray) and value.size == 1 or isinstance(value, torch.Tensor) and value.numel() == 1:
        value = value.item()  # a one-element array, as a reduction gives it
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ArgumentTypeError(name, f"{name} must be a number, not {kind_of(value)}.")
    try:
        v = float(value)
    except OverflowError:  # an int past float's range (10**5000)
        v = math.inf if value > 0 else -math.inf
    wanted = f"{name} must be a finite{' non-zero' if nonzero else ''} number" + (" or -inf" if minus_inf else "")
    wanted += f" of magnitude at most {high:g}" if high is not None else ""
    if (
        math.isnan(v)
        or (math.isinf(v) and not (minus_inf and v < 0))
        or (nonzero and v == 0)
        or (high is not None and math.isfinite(v) and abs(v) > high)
    ):
        raise ArgumentError(name, f"{wanted}; got {v:g}.")
    if low is not None and v < low:
        raise ArgumentError(name, f"{name} must be at least {low:g}, got {v:g}.")
    return v


def flag(name: str, value, *, none: bool = False) -> bool | None:
    """True or False (a numpy bool too); not 0/1, not a str."""
    if value is None and none:
        return None
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    raise ArgumentTypeError(name, f"{name} must be True or False, not {kind_of(value)}.")


def text(name: str, value, *, none: bool = False) -> str | None:
    """A str that is valid Unicode text: a lone surrogate ('\\ud800') is no character, and no tokenizer reads it."""
    if value is None and none:
        return None
    if not isinstance(value, str):
        raise ArgumentTypeError(name, f"{name} must be a str, not {kind_of(value)}.")
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as e:
            raise ArgumentError(
                name,
                f"{name} holds a lone surrogate (U+{ord(value[e.start]):04X}) at character "
                f"{e.start:,}: half of a UTF-16 pair, not a character.",
            ) from None
    return value


def choice(name: str, value, options) -> str:
    """One of a closed vocabulary of strings."""
    if not isinstance(value, str):
        raise ArgumentTypeError(
            name, f"{name} must be a str, one of {', '.join(map(repr, options))}; not {kind_of(value)}."
        )
    if value not in options:
        raise ArgumentError(name, f"{name} must be one of {', '.join(map(repr, options))}; got {shown(value)}.")
    return value


def positions(name: str, values, size: int, what: str = "positions") -> tuple[int, ...]:
    """Distinct positions 0..size-1, sorted: a list, tuple, set, range, 1-axis array or a single int. More entries
    than `size` are refused without reading them all, so range(10**7) costs nothing."""
    if values is None:
        return ()
    if (
        isinstance(values, (str, bytes))
        or not isinstance(values, (numbers.Integral, torch.Tensor, np.ndarray))
        and not hasattr(values, "__iter__")
    ):
        raise ArgumentTypeError(name, f"{name} must be a list of whole numbers, not {kind_of(values)}.")
    if isinstance(values, (torch.Tensor, np.ndarray)) and values.ndim > 1:
        raise ArgumentError(name, f"{name} must be a flat list of {what}, got {values.ndim} axes.")
    if isinstance(values, numbers.Integral) and not isinstance(values, bool) or getattr(values, "ndim", 1) == 0:
        values = [values]
    picked = list(itertools.islice(iter(values), size + 1))
    if len(picked) > size:
        raise ArgumentError(name, f"{name} lists more than {size:,} {what}; there are {size:,} (0..{size - 1}).")
    out = sorted({whole(name, v) for v in picked})
    bad = [i for i in out if not 0 <= i < size]
    if bad:
        listed = ", ".join(shown(i) for i in bad[:5]) + (", ..." if len(bad) > 5 else "")
        raise ArgumentError(
            name, f"{name} names {what} {listed} that do not exist; there are {size:,} (0..{size - 1})."
        )
    return tuple(out)


def tokens(name: str, value) -> tuple[str, ...]:
    """A sequence of at most MAX_TOKENS strs (a str itself is one text, not tokens)."""
    if isinstance(value, (str, bytes)) or not hasattr(value, "__iter__"):
        raise ArgumentTypeError(name, f"{name} must be a list of str, not {kind_of(value)}.")
    items = tuple(itertools.islice(iter(value), MAX_TOKENS + 1))
    if len(items) > MAX_TOKENS:
        raise ArgumentError(name, f"{name} holds more than {MAX_TOKENS:,} tokens, the limit.")
    wrong = next((t for t in items if not isinstance(t, str)), None)
    if wrong is not None:
        raise ArgumentTypeError(name, f"{name} must hold str tokens, not {kind_of(wrong)}.")
    return tuple(str(t) for t in items)  # numpy str_ as plain str


def sizes(name: str, values, *, most: int = 64, high: int = MAX_WIDTH) -> tuple[int, ...]:
    """A short list (at most `most` entries) of sizes 1..high, such as the widths of an experiment."""
    if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
        raise ArgumentTypeError(name, f"{name} must be a list of whole numbers, not {kind_of(values)}.")
    picked = list(itertools.islice(iter(values), most + 1))
    if len(picked) > most:
        raise ArgumentError(name, f"{name} lists more than {most} sizes.")
    return tuple(whole(name, v, low=1, high=high) for v in picked)


def window(name: str, value, size: int) -> tuple[int, int] | None:
    """A (start, stop) pair of whole numbers (or a slice of them, or None for all); clipping to 0..size is the
    caller's, as slicing does."""
    if value is None:
        return None
    if isinstance(value, slice):
        if value.step not in (None, 1):
            raise ArgumentError(name, f"{name} must be a (start, stop) window without a step, got step {value.step}.")
        value = (0 if value.start is None else value.start, size if value.stop is None else value.stop)
    if isinstance(value, (str, bytes)) or not isinstance(value, (tuple, list)) or len(value) != 2:
        raise ArgumentTypeError(name, f"{name} must be a (start, stop) pair of whole numbers, not {kind_of(value)}.")
    return whole(f"{name} start", value[0]), whole(f"{name} stop", value[1])


def inside(name: str, value, size: int, what: str = "tokens") -> tuple[int, int]:
    """A non-empty (start, stop) window of whole numbers within 0..size (no clipping: a window a page drew)."""
    start, stop = window(name, value, size) or (0, size)
    if not 0 <= start < stop <= size:
        raise ArgumentError(name, f"The {name} {start}..{stop} is not within the {size:,} {what}.")
    return start, stop


def inside_cells(name: str, value, n_queries: int, n_keys: int) -> tuple[tuple[int, int], tuple[int, int]]:
    """((query start, stop), (key start, stop)): `inside` each axis."""
    if isinstance(value, (str, bytes)) or not isinstance(value, (tuple, list)) or len(value) != 2:
        raise ArgumentTypeError(name, f"{name} must be ((query start, stop), (key start, stop)), not {kind_of(value)}.")
    return inside(f"{name} of queries", value[0], n_queries, "queries"), inside(
        f"{name} of keys", value[1], n_keys, "keys"
    )


def fits(name: str, value, shape) -> torch.Tensor:
    """An array that broadcasts against `shape` without growing it (a mask over scores), as a tensor."""
    t = array(name, value, range(len(shape) + 1), finite=False)
    try:
        grown = torch.broadcast_shapes(t.shape, shape) != torch.Size(shape)
    except RuntimeError:
        grown = True
    if grown:
        raise ArgumentError(name, f"{name} of shape {tuple(t.shape)} does not fit {tuple(shape)}.")
    return t


def lengths(name: str, value, batch: int | None = None) -> torch.Tensor:
    """Valid lengths, [batch] or [batch, query]: whole numbers >= 0 (one row per batch item when `batch` is given)."""
    t = array(name, value, (1, 2))
    if t.dtype == torch.bool or t.is_floating_point() and not bool((t == t.round()).all()) or bool((t < 0).any()):
        raise ArgumentError(name, f"{name} must hold whole numbers >= 0.")
    if batch is not None and t.shape[0] not in (1, batch):
        raise ArgumentError(name, f"{name} has {t.shape[0]} rows for a batch of {batch}.")
    return t


def cells(name: str, *sizes: int, most: int = MAX_CELLS) -> None:
    """Refuse an array of `sizes` with more than `most` elements before anything is allocated."""
    if math.prod(sizes) > most:
        raise ArgumentError(
            name,
            f"{name} would hold {math.prod(sizes):,} elements ({' x '.join(map(str, sizes))}); the limit is {most:,}.",
        )


def array(name: str, value, ranks: tuple[int, ...], *, finite: bool = True, dtype=None) -> torch.Tensor:
    """An array (numpy, torch or nested lists) as a tensor, with one of `ranks` axes, at most MAX_CELLS elements and,
    when `finite`, no NaN or infinity (bool arrays are always accepted as they are)."""
    if isinstance(value, (str, bytes, numbers.Number)) or value is None:
        raise ArgumentTypeError(
            name, f"{name} must be an array ({' or '.join(f'{r} axes' for r in ranks)}), not {kind_of(value)}."
        )
    try:
        t = value if isinstance(value, torch.Tensor) else torch.as_tensor(np.asarray(value))
    except (TypeError, ValueError, RuntimeError) as e:
        raise ArgumentTypeError(name, f"{name} must be an array of numbers ({e}).") from None
    if t.dtype.is_complex:
        raise ArgumentTypeError(name, f"{name} must hold real numbers, not {t.dtype}.")
    if t.dim() not in ranks:
        raise ArgumentError(
            name, f"{name} must have {' or '.join(map(str, ranks))} axes, got {t.dim()} (shape {tuple(t.shape)})."
        )
    cells(name, t.numel())
    if finite and t.is_floating_point() and t.device.type != "meta" and not bool(torch.isfinite(t).all()):
        raise ArgumentError(name, f"{name} holds NaN or infinite values.")
    return t if dtype is None else t.to(dtype)


def keywords(label: str, given, allowed) -> None:
    """Refuse a keyword `label` does not take, naming it and what it does take (a close spelling first)."""
    for key in given:
        if key not in allowed:
            near = difflib.get_close_matches(str(key), list(allowed), n=1)
            hint = f" Did you mean {near[0]!r}?" if near else ""
            raise ArgumentTypeError(
                str(key), f"{label} takes no argument {key!r}; it takes {', '.join(allowed)}.{hint}"
            )


def public(func=None, *, name: str | None = None, extra: tuple[str, ...] = ()):
    """Check a call against `func`'s signature before it runs: an unknown keyword, a missing argument or too many
    arguments is an ArgumentTypeError naming the argument (Python's own TypeError would come from inside). A function
    with **keywords is checked only when `extra` names what they may be."""
    if func is None:
        return functools.partial(public, name=name, extra=extra)
    signature = inspect.signature(func)
    label = name or func.__qualname__
    named = [p.name for p in signature.parameters.values() if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    open_ended = any(p.kind == p.VAR_KEYWORD for p in signature.parameters.values())
    fits = _positional_counts(signature)
    kw_only = frozenset(p.name for p in signature.parameters.values() if p.kind == p.KEYWORD_ONLY)

    @functools.wraps(func)
    def checked(*args, **kwargs):
        if fits[0] <= len(args) <= fits[1] and kwargs.keys() <= kw_only:  # binds as it is: no need to ask bind
            return func(*args, **kwargs)
        if extra or not open_ended:  # `extra`: what a **keywords parameter takes
            keywords(label, kwargs, [n for n in named if n not in ("self", "cls")] + list(extra))
        try:
            signature.bind(*args, **kwargs)
        except TypeError as e:
            quoted = str(e).split("'")
            raise ArgumentTypeError(quoted[1] if len(quoted) > 2 else "arguments", f"{label}: {e}.") from None
        return func(*args, **kwargs)

    return checked


def _positional_counts(signature: inspect.Signature) -> tuple[float, float]:
    """(fewest, most) positional arguments with which a call binds whose keywords are keyword-only parameters (which
    then all have defaults); (inf, -inf) when a keyword-only parameter has none, so every call is fully checked."""
    params = list(signature.parameters.values())
    if any(p.kind == p.KEYWORD_ONLY and p.default is p.empty for p in params):
        return math.inf, -math.inf
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    most = math.inf if any(p.kind == p.VAR_POSITIONAL for p in params) else len(positional)
    return sum(p.default is p.empty for p in positional), most
