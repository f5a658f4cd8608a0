"""What may be loaded, decided before any download: hosted allow-list, size budget, hub reachability."""

from __future__ import annotations

import json
import os
import re
import socket
import struct
from pathlib import Path
from urllib.parse import urlparse

from .. import settings
from ..errors import ModelLoadError

_HUB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,95}(/[A-Za-z0-9][A-Za-z0-9._-]{0,95})?$")


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
        check_size(label, folder_parameters(path) * bytes_per_param)
        return True
    if not _HUB_ID.match(label):
        hint = ""
        if label.startswith((".", "/", "~")):
            hint = f" No folder exists at {os.path.abspath(path)!r} (relative paths start from {os.getcwd()!r})."
        raise ModelLoadError(
            f"{label!r} is neither an existing folder nor a valid hub id (like 'gpt2' or "
            f"'google-bert/bert-base-uncased').{hint}"
        )
    if os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes") or not hub_reachable():
        return True  # fails in well under a second if the model is not in the cache
    n = hub_parameters(label)
    check_size(label, None if n is None else n * bytes_per_param)
    return False


def hub_reachable(timeout: float = 3.0) -> bool:
    """One quick TCP connect instead of transformers' retries (about 25-45 s on a closed network)."""
    host = urlparse(os.environ.get("HF_ENDPOINT", "https://huggingface.co")).hostname or "huggingface.co"
    try:
        socket.create_connection((host, 443), timeout=timeout).close()
        return True
    except OSError:
        return False


def hub_parameters(label: str) -> int | None:
    """How many parameters the hub says the model's safetensors hold, or None if it will not say."""
    try:
        from huggingface_hub import HfApi

        info = HfApi().model_info(label, timeout=10)
    except Exception:  # noqa: BLE001 - the real load then reports a missing model with a clear message
        return None
    meta = getattr(info, "safetensors", None)
    return int(meta.total) if meta is not None and getattr(meta, "total", None) else None


def folder_parameters(path: str) -> int:
    """Parameters in a folder's .safetensors files, read from their headers (no weights are loaded)."""
    total = 0
    for f in Path(path).glob("*.safetensors"):
        try:
            with f.open("rb") as fh:
                (n,) = struct.unpack("<Q", fh.read(8))
                header = json.loads(fh.read(min(n, 100_000_000)))
        except (OSError, ValueError, struct.error):
            continue  # a damaged file is reported by the real load
        for name, t in header.items():
            if name != "__metadata__" and isinstance(t, dict):
                count = 1
                for d in t.get("shape", []):
                    count *= int(d)
                total += count
    return total


def check_size(label: str, n_bytes: int | None) -> None:
    budget = settings.current().max_model_bytes
    if n_bytes is not None and n_bytes > budget:
        raise ModelLoadError(
            f"{label!r} needs {n_bytes / 2**20:,.1f} MB for its weights, over this dashboard's budget of "
            f"{budget / 2**20:,.1f} MB (ATTNVIZ_MAX_MODEL_MB). Choose a smaller model."
        )
