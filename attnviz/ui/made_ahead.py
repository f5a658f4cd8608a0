"""The default view made ahead: the bundled model's trace of the default sentence and the Heads page's first two
figures drawn from it, kept in the cache folder the settings name (ATTNVIZ_CACHE_DIR), so that a cold server draws its
first heatmaps at once while torch's first calls, transformers and the model still load (ui.first_view).

Made when the image is built (`python scripts/first_view.py`, the Dockerfile) and, where it is missing, by the server
after its first trace of the default view (`keep`), so every later start has it. Three files, each bounded:
`first-view.npz`, the trace (attnviz.trace.save's format: `load_trace` reopens every stage of it), `first-view-figures.json`,
the figures the live page draws for the default view, made from that trace (`default_figures`; a figure costs a
cold process about a second the first time, reading it back a tenth of that), and `first-view.json`, the stamp:
this module's format, the attnviz version and a hash of its code, the bundled model's fingerprint (every file's name
and size, the small files' bytes, the weights' modification time), the versions a trace depends on (torch,
transformers, tokenizers, numpy, plotly...), the device and dtype a server here loads the model on, the text, and the
SHA-256 of the other two files. `load` gives the figures only when all of it matches what this process would draw;
a missing, stale, corrupt or edited file gives None, never an error.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from .. import figures, settings
from ..export import open_npz, trace_npz, versions
from ..hf import bundled_model_path
from ..hf.load import choose_device
from ..trace import AttentionTrace
from ..trace.file_bounds import Limits

FORMAT = 1  # of the stamp and what the files hold; a change makes every older file stale
TRACE = "first-view.npz"
FIGURES = "first-view-figures.json"
STAMP = "first-view.json"
SHOWN = ("head_grid", "head_detail")  # the figures a cold start draws (the first screen of Heads)
MAX_TRACE_BYTES = 4 * 2**20  # the default sentence's trace takes ~350 kB; a larger file is not read
MAX_FIGURES_BYTES = 2**20  # its figures ~60 kB
MAX_STAMP_BYTES = 64 * 2**10
SMALL_FILE = 2**20  # model files up to this size are fingerprinted by their bytes, larger ones by size and time
LIMITS = Limits(tokens=512, bytes=64 * 2**20, layers=64, heads=64)  # the bundled model's shape, with room


@dataclass(frozen=True)
class Made:
    """What a cold start draws: the figures (Plotly's JSON, by name) and the facts its captions need."""

    figures: dict
    where: str  # "layer 0"
    n_head: int
    n_tokens: int


def default_figures(trace: AttentionTrace) -> figures.Drawn:
    """The Heads page's figures at its default view: layer 0, head 0, weights, linear colours, every token."""
    return figures.heads(trace, 0, 0, "weights", "linear", None, None, (), 0, {})


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


def code_fingerprint() -> str:
    """attnviz's own source as it is here (a figure's code changed without a new version number gives another)."""
    root = Path(__file__).resolve().parents[1]  # the attnviz package, not only its ui
    h = hashlib.sha256()
    for f in sorted(root.rglob("*.py")):
        h.update(f"{f.relative_to(root).as_posix()}\0".encode())
        h.update(f.read_bytes())
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
        "code": code_fingerprint(),
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


def load(text: str, where: Path | None = None) -> Made | None:
    """The made-ahead figures of `text`'s default view, or None when there are none that this process would draw
    alike (the trace file is checked by its hash, not opened: `load_trace` opens it)."""
    where = where or folder()
    try:
        kept = json.loads(_bounded(where / STAMP, MAX_STAMP_BYTES))
        sums = kept.pop("sha256")
        if kept != stamp(text) or _sha(where / TRACE, MAX_TRACE_BYTES) != sums[TRACE]:
            return None
        data = _bounded(where / FIGURES, MAX_FIGURES_BYTES)
        if hashlib.sha256(data).hexdigest() != sums[FIGURES]:
            return None
        made = json.loads(data)
        return Made({k: made["figures"][k] for k in SHOWN}, **{k: made[k] for k in ("where", "n_head", "n_tokens")})
    except Exception:  # noqa: BLE001 - files that are not right are not used: the live path runs as before
        return None


def load_trace(where: Path | None = None) -> AttentionTrace:
    """The made-ahead trace itself, reopened within bounds (attnviz.trace.file), every stage as it was traced."""
    return open_npz(_bounded((where or folder()) / TRACE, MAX_TRACE_BYTES), limits=LIMITS)[0]


def _sha(path: Path, limit: int) -> str:
    return hashlib.sha256(_bounded(path, limit)).hexdigest()


def save(trace: AttentionTrace, text: str, where: Path | None = None) -> Path:
    """Write `trace` (the bundled model's trace of `text`), the default view's figures drawn from it, and their stamp,
    each through a temporary name and the stamp last, so a reader never meets half a file or a stamp that names
    files not yet there."""
    where = where or folder()
    where.mkdir(parents=True, exist_ok=True)
    drawn = default_figures(trace)
    made = {
        "figures": {k: drawn[k].to_plotly_json() for k in SHOWN},
        "where": trace.provenance.layer_label(0),
        "n_head": trace.n_head,
        "n_tokens": trace.n_tokens,
    }
    files = {TRACE: trace_npz(trace, text), FIGURES: plotly_json(made)}
    for name, limit in ((TRACE, MAX_TRACE_BYTES), (FIGURES, MAX_FIGURES_BYTES)):
        if len(files[name]) > limit:
            raise ValueError(f"{name} would take {len(files[name])} bytes, more than {limit}")
    kept = stamp(text) | {"sha256": {k: hashlib.sha256(v).hexdigest() for k, v in files.items()}}
    files[STAMP] = json.dumps(kept, indent=1).encode()
    for name, content in files.items():
        tmp = where / f".{name}.{os.getpid()}.tmp"
        tmp.write_bytes(content)
        tmp.replace(where / name)
    return where / FIGURES


def plotly_json(obj) -> bytes:
    """JSON as Plotly writes a figure (its encoder takes numpy arrays)."""
    from plotly.utils import PlotlyJSONEncoder

    return json.dumps(obj, cls=PlotlyJSONEncoder).encode()


def keep(trace: AttentionTrace, text: str, where: Path | None = None) -> None:
    """After a trace of the default view: write it unless a file that `load` takes is there already. A folder this
    process cannot write (a read-only image) is said in the log and otherwise ignored."""
    where = where or folder()
    if load(text, where) is not None:
        return
    try:
        saved = save(trace, text, where)
    except Exception as e:  # noqa: BLE001 - a cache that cannot be written changes nothing for the visitor
        print(f"attnviz: first view not saved ({type(e).__name__}: {e})", file=sys.stderr, flush=True)
        return
    print(f"attnviz: first view saved to {saved}", file=sys.stderr, flush=True)
