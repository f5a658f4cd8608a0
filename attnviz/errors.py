"""One error type for everything a user can get wrong; its message always says what to do."""

from __future__ import annotations

import numbers
import operator


class AttnvizError(Exception):
    """A problem the user can fix (bad input, a model we cannot load or capture). Safe to show as-is."""


class ModelLoadError(AttnvizError):
    """A model name or folder that cannot be loaded."""


class InputError(AttnvizError):
    """Text or options that cannot be traced."""


class ArgumentError(InputError, ValueError):
    """An argument of a public function with a value it cannot take (NaN, out of range, too large); `argument` names
    it. Also a ValueError, so callers that caught ValueError from the same call before still catch it."""

    def __init__(self, argument: str, message: str):
        super().__init__(message)
        self.argument = argument

    def __reduce__(self):  # picklable (Streamlit and multiprocessing copy errors) despite the two-part constructor
        return type(self), (self.argument, str(self))


class ArgumentTypeError(ArgumentError, TypeError):
    """An argument of the wrong type (a str for a number, a float for a whole number, an unknown keyword): also a
    TypeError, as Python's own would be."""


def kind_of(value) -> str:
    """A value's type in words for a message: 'str', 'float', 'a 3-axis ndarray'."""
    shape = getattr(value, "shape", None)
    if isinstance(shape, tuple) and not isinstance(value, numbers.Number):
        return f"a {len(shape)}-axis {type(value).__name__}"
    return type(value).__name__


def whole_number(name: str, value) -> int:
    """`value` as an int: ints, numpy and one-element torch integers; never a bool, a float (even 2.0) or a str."""
    try:
        if isinstance(value, bool):
            raise TypeError
        return operator.index(value)
    except TypeError:
        raise ArgumentTypeError(name, f"{name} must be a whole number (int), not {kind_of(value)}.") from None


def check_index(name: str, index, size: int) -> int:
    """`index` as an int in 0..size-1 (negative counts from the end), else an error naming the argument and range.

    Whole numbers only (`whole_number`): a bool, a float or a str is a wrong type, said as such."""
    i = whole_number(name, index)
    if not -size <= i < size:
        shown = f"{i}" if abs(i) < 10**12 else ("a huge number" if i > 0 else "a huge negative number")
        raise ArgumentError(name, f"{name.capitalize()} {shown} does not exist: choose {name} 0..{size - 1}.")
    return i % size


def first_line(error: BaseException | str, limit: int = 240, named: bool = False) -> str:
    """The first line of a message (an exception's or any text), at most `limit` characters: a library's message
    often goes on with a dump or a traceback that means nothing to a reader. `named`: 'TypeName: first line'."""
    line = (str(error).splitlines() or [""])[0][:limit]
    return f"{type(error).__name__}: {line}" if named else line
