"""A failed load, said twice: to the user as a message that says what to do, to the operator as one log line.

In hosted mode the message names no path on the server (a cached file, the bundled model's folder): whoever reads
it is a stranger on the internet.
"""

from __future__ import annotations

import contextlib
import logging
import re

from .. import settings
from ..errors import ModelLoadError, first_line

log = logging.getLogger("attnviz")

# an absolute POSIX or Windows path of two parts or more, not the path part of a URL (https://host/a/b)
_PATH = re.compile(r"(?<![\w:/.])(?:[A-Za-z]:)?[/\\~][^\s'\"()\[\]{},;]*[/\\][^\s'\"()\[\]{},;]*")


@contextlib.contextmanager
def reported(name):
    """Around a load: a ModelLoadError is logged (model id and reason, one line, never the user's text) and, in
    hosted mode, re-raised without server paths."""
    try:
        yield
    except ModelLoadError as e:
        text = " ".join(str(e).split())
        log.warning("attnviz: could not load model %s: %s", repr(str(name))[:120] if name else "bundled", text[:600])
        if settings.current().hosted:
            raise ModelLoadError(without_paths(str(e))) from None
        raise


def without_paths(text: str) -> str:
    """`text` with every absolute path replaced by "<path>"."""
    return _PATH.sub("<path>", text)


def explain(name: str, err: Exception) -> ModelLoadError:
    """A loading failure as a message that says why and what to try instead."""
    text = f"{type(err).__name__}: {err}"
    low = text.lower()
    if "trust_remote_code" in low or "custom code" in low:
        why = "it needs custom code from the hub (trust_remote_code), which attnviz never runs"
    elif "safetensors" in low and ("no file" in low or "does not appear" in low or "not found" in low):
        why = "it has no .safetensors weights (attnviz only loads safetensors, never pickled weights)"
    elif "config.json" in low or "not a valid model identifier" in low or "repository not found" in low:
        why = "no model with that name was found (not a local folder with config.json, nor a hub id)"
    elif "offline" in low or "connection" in low or "resolve" in low or "network" in low or "timed out" in low:
        why = "the Hugging Face hub cannot be reached from here, and the model is not in the local cache"
    elif "unrecognized" in low or "model type" in low:
        why = "transformers does not know this model type"
    elif "header" in low or "deserializ" in low or "incomplete" in low or "corrupt" in low:
        why = "its weight file is damaged or incomplete"
    else:
        why = first_line(text, 300)
    return ModelLoadError(
        f"Could not load model {name!r}: {why}. Try a hub id such as 'bert-base-uncased' or 'gpt2' (needs a network), "
        "a local folder made with save_pretrained, or leave the name empty for the bundled all-MiniLM-L6-v2."
    )
