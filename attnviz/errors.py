"""One error type for everything a user can get wrong; its message always says what to do."""


class AttnvizError(Exception):
    """A problem the user can fix (bad input, a model we cannot load or capture). Safe to show as-is."""


class ModelLoadError(AttnvizError):
    """A model name or folder that cannot be loaded."""


class InputError(AttnvizError):
    """Text or options that cannot be traced."""
