"""What may be loaded, decided before any download: hosted allow-list, size budget, hub reachability.

The size budget applies to every load, from the hub, from its local cache (offline or not) and from a folder, and
fails closed: weights whose size cannot be read from their safetensors headers are refused. Only the bundled
model, which is known to fit, is not checked.
"""

from __future__ import annotations

import os
import re
import socket
from urllib.parse import urlparse

from .. import settings
from ..errors import ModelLoadError

_HUB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,95}(/[A-Za-z0-9][A-Za-z0-9._-]{0,95})?$")
TRY = "Try a local folder made with save_pretrained, or leave the name empty for the bundled all-MiniLM-L6-v2."


def check_before_loading(label: str, path: str, bytes_per_param: int = 4) -> bool:
    """Refuse what must not be loaded, fast; return True when only the local cache can serve the model.

    The size budget counts the memory the weights take in the dtype they will be loaded in.
    """
    conf = settings.current()
    is_folder = os.path.isdir(path)
    if conf.hosted and (is_folder or label not in conf.allowed_models):
        allowed = ", ".join(conf.allowed_models) or "none besides the bundled model"
        raise ModelLoadError(f"This hosted dashboard only loads these models: {allowed}. {label!r} is not one of them.")
    if is_folder:
        _check_local(label, path, bytes_per_param)
        return True
    if not _HUB_ID.match(label):
        # never the absolute path or the working folder: whoever reaches the page need not be on this machine
        hint = " No folder exists there (relative paths start from the folder the server was started in)."
        raise ModelLoadError(
            f"{label!r} is neither an existing folder nor a valid hub id (like 'gpt2' or "
            f"'google-bert/bert-base-uncased').{hint if label.startswith(('.', '/', '~')) else ''}"
        )
    if os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes") or not hub_reachable():
        snapshot = cached_snapshot(label)
        if snapshot is not None:  # else the load reports the model missing from the cache, having read nothing
            _check_local(label, snapshot, bytes_per_param)
        return True
    check_size(label, hub_parameters(label) * bytes_per_param)
    return False


def _check_local(label: str, folder: str, bytes_per_param: int) -> None:
    if os.path.isfile(os.path.join(folder, "config.json")):  # without one, the load fails before reading weights
        check_size(label, local_parameters(label, folder) * bytes_per_param)


def hub_reachable(timeout: float = 3.0) -> bool:
    """One quick TCP connect instead of transformers' retries (about 25-45 s on a closed network)."""
    url = urlparse(os.environ.get("HF_ENDPOINT", "https://huggingface.co"))
    port = url.port or (80 if url.scheme == "http" else 443)  # a mirror may name its own port
    try:
        socket.create_connection((url.hostname or "huggingface.co", port), timeout=timeout).close()
        return True
    except OSError:
        return False


def cached_snapshot(label: str) -> str | None:
    """The folder of the hub cache that an offline load of `label` reads (its main revision), or None."""
    from huggingface_hub import try_to_load_from_cache

    config = try_to_load_from_cache(label, "config.json")
    return os.path.dirname(config) if isinstance(config, str) else None


def local_parameters(label: str, folder: str) -> int:
    """Parameters of the weights transformers loads from `folder` (model.safetensors, or the shards its index
    names), read from their safetensors headers without reading the weights. Refuses when they cannot be read."""
    from huggingface_hub import get_local_safetensors_metadata
    from huggingface_hub.errors import NotASafetensorsRepoError

    try:
        meta = get_local_safetensors_metadata(folder)
    except NotASafetensorsRepoError:
        raise ModelLoadError(
            f"Could not load model {label!r}: it has no .safetensors weights (attnviz only loads safetensors, never "
            f"pickled weights). {TRY}"
        ) from None
    except Exception as e:  # noqa: BLE001 - SafetensorsParsingError, OSError, a malformed index...
        raise ModelLoadError(
            f"Could not load model {label!r}: its weight file is damaged or incomplete ({type(e).__name__}), so its "
            f"size cannot be checked against this dashboard's budget. {TRY}"
        ) from None
    return sum(meta.parameter_count.values())


def hub_parameters(label: str) -> int:
    """How many parameters the hub says the model's safetensors hold; refuses when the hub will not say."""
    from huggingface_hub import HfApi, get_safetensors_metadata
    from huggingface_hub.errors import NotASafetensorsRepoError, RepositoryNotFoundError

    try:
        total = getattr(getattr(HfApi().model_info(label, timeout=10), "safetensors", None), "total", None)
        # the hub computes `total` for most repositories; else read the headers (a few KB per file)
        return int(total) if total else sum(get_safetensors_metadata(label).parameter_count.values())
    except RepositoryNotFoundError:  # gated and private repositories too
        why = "no model with that name was found on the hub (or it is private or gated)"
    except NotASafetensorsRepoError:
        why = "it has no .safetensors weights (attnviz only loads safetensors, never pickled weights)"
    except Exception as e:  # noqa: BLE001 - fail closed: a size that cannot be read is not loaded
        why = (
            f"the hub did not say how large its weights are ({type(e).__name__}), so the size budget cannot be checked"
        )
    raise ModelLoadError(f"Could not load model {label!r}: {why}. {TRY}")


def check_size(label: str, n_bytes: int) -> None:
    budget = settings.current().max_model_bytes
    if n_bytes > budget:
        raise ModelLoadError(
            f"{label!r} needs {n_bytes / 2**20:,.1f} MB for its weights, over this dashboard's budget of "
            f"{budget / 2**20:,.1f} MB (ATTNVIZ_MAX_MODEL_MB). Choose a smaller model."
        )
