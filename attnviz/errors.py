"""One error type for everything a user can get wrong; its message always says what to do."""


class AttnvizError(Exception):
    """A problem the user can fix (bad input, a model we cannot load or capture). Safe to show as-is."""


class ModelLoadError(AttnvizError):
    """A model name or folder that cannot be loaded."""


class InputError(AttnvizError):
    """Text or options that cannot be traced."""


def check_index(name: str, index, size: int) -> int:
    """`index` as an int in 0..size-1 (negative counts from the end), else an InputError naming the range."""
    try:
        i = int(index)
    except (TypeError, ValueError):
        raise InputError(f"{name} must be a whole number, got {index!r}.") from None
    if not -size <= i < size:
        raise InputError(f"{name.capitalize()} {i} does not exist: choose {name} 0..{size - 1}.")
    return i % size


def first_line(error: BaseException | str, limit: int = 240, named: bool = False) -> str:
    """The first line of a message (an exception's or any text), at most `limit` characters: a library's message
    often goes on with a dump or a traceback that means nothing to a reader. `named`: 'TypeName: first line'."""
    line = (str(error).splitlines() or [""])[0][:limit]
    return f"{type(error).__name__}: {line}" if named else line
