"""The default view's trace made ahead: a trace file of the bundled model's default sentence, kept in the cache folder
the settings name (ATTNVIZ_CACHE_DIR), so that a cold server draws the first heatmaps from it while transformers and
the model still load (attnviz.ui.first_view), instead of waiting seconds for them.

It is made when the image is built (`python -m attnviz.first_view`, the Dockerfile) and, where it is missing, by the
server after its first trace of the default view (`keep`), so every later start has it. Two files, both bounded:
`first-view.npz` (attnviz.trace.save's format, reopened within bounds by attnviz.trace.file) and `first-view.json`,
its stamp: this module's format, the bundled model's fingerprint (every file's name, size and modification time, the
small files' bytes), the versions a trace depends on (attnviz, torch, transformers, tokenizers, numpy...), the device
and dtype a server here loads the model on, the text, and the .npz's SHA-256. `load` gives the trace only when all of
them match what this process would trace; a missing, stale, corrupt or edited file gives None, never an error.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from importlib import metadata
from pathlib import Path

from . import settings
from .export import open_npz, trace_npz, versions
from .hf import bundled_model_path
from .hf.load import choose_device
from .trace import AttentionTrace
from .trace.file_bounds import Limits

FORMAT = 1  # of the stamp and what the file holds; a change makes every older file stale
TRACE = "first-view.npz"
STAMP = "first-view.json"
MAX_TRACE_BYTES = 4 * 2**20  # the default sentence's trace is ~60 kB; a file larger than this is not read
MAX_STAMP_BYTES = 64 * 2**10
SMALL_FILE = 2**20  # model files up to this size are fingerprinted by their bytes, larger ones by size and time
LIMITS = Limits(tokens=512, bytes=64 * 2**20, layers=64, heads=64)  # the bundled model's shape, with room


def folder() -> Path:
    return Path(settings.current().cache_dir).expanduser()


def model_fingerprint(root: str | None = None) -> str:
    """The bundled model's files as they are here: a reinstalled, upgraded or edited model gives another."""
    root_path = Path(root or bundled_model_path())
    h = hashlib.sha256()
    for f in sorted(p for p in root_path.rglob("*") if p.is_file()):
        st = f.stat()
        h.update(f"{f.relative_to(root_path).as_posix()}\0{st.st_size}\0".encode())
        h.update(f.read_bytes() if st.st_size <= SMALL_FILE else str(st.st_mtime_ns).encode())
    return h.hexdigest()


def stamp(text: str) -> dict:
    """What a trace of `text` by the bundled model on this machine depends on (compared whole by `load`)."""
    device, dtype = choose_device()
    try:
        tokenizers = metadata.version("tokenizers")
    except metadata.PackageNotFoundError:
        tokenizers = "not installed"
    return {
        "format": FORMAT,
        "model": model_fingerprint(),
        "versions": versions() | {"tokenizers": tokenizers},
        "device": device,
        "dtype": dtype,
        "text": text,
    }


def _bounded(path: Path, limit: int) -> bytes:
    with path.open("rb") as f:
        data = f.read(limit + 1)
    if len(data) > limit:
        raise ValueError(f"{path.name} is larger than {limit} bytes")
    return data


def load(text: str, where: Path | None = None) -> AttentionTrace | None:
    """The made-ahead trace of `text`, or None when there is none that this process would trace alike."""
    where = where or folder()
    try:
        kept = json.loads(_bounded(where / STAMP, MAX_STAMP_BYTES))
        sha = kept.pop("sha256")
        if kept != stamp(text):
            return None
        data = _bounded(where / TRACE, MAX_TRACE_BYTES)
        if hashlib.sha256(data).hexdigest() != sha:
            return None
        trace, _ = open_npz(data, limits=LIMITS)
        return trace
    except Exception:  # noqa: BLE001 - a file that is not right is not used: the live path runs as before
        return None


def save(trace: AttentionTrace, text: str, where: Path | None = None) -> Path:
    """Write `trace` (the bundled model's trace of `text`, the default view) and its stamp; the trace file first,
    each through a temporary name, so a reader never meets half a file and a stamp never names a missing trace."""
    where = where or folder()
    where.mkdir(parents=True, exist_ok=True)
    data = trace_npz(trace, text)
    if len(data) > MAX_TRACE_BYTES:
        raise ValueError(f"the trace file would take {len(data)} bytes, more than {MAX_TRACE_BYTES}")
    kept = stamp(text) | {"sha256": hashlib.sha256(data).hexdigest()}
    for name, content in ((TRACE, data), (STAMP, json.dumps(kept, indent=1).encode())):
        tmp = where / f".{name}.{os.getpid()}.tmp"
        tmp.write_bytes(content)
        tmp.replace(where / name)
    return where / TRACE


def keep(trace: AttentionTrace, text: str) -> None:
    """After a trace of the default view: write it unless a file that `load` takes is there already. A folder this
    process cannot write (a read-only image) is said in the log and otherwise ignored."""
    if load(text) is not None:
        return
    try:
        saved = save(trace, text)
    except Exception as e:  # noqa: BLE001 - a cache that cannot be written changes nothing for the visitor
        print(f"attnviz: first view not saved ({type(e).__name__}: {e})", file=sys.stderr, flush=True)
        return
    print(f"attnviz: first view saved to {saved}", file=sys.stderr, flush=True)
