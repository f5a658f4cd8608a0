"""Every ATTNVIZ_* setting, read from the environment in this one place.

| variable                 | default           | meaning                                                        |
|--------------------------|-------------------|----------------------------------------------------------------|
| ATTNVIZ_HOSTED           | see below         | only the bundled model and the allow-list load; no folders     |
| ATTNVIZ_ALLOWED_MODELS   | empty             | comma-separated hub ids a hosted dashboard may load            |
| ATTNVIZ_MAX_TOKENS       | see below         | the cap on the sidebar's Token limit (longest text traced)    |
| ATTNVIZ_MAX_MODEL_MB     | 1500              | weights larger than this are refused before loading            |
| ATTNVIZ_TRACE_CACHE_MB   | 1024              | byte budget of the dashboard's trace cache, all sessions       |
| ATTNVIZ_MAX_UPLOAD_MB    | 256 (64 hosted)   | most an uploaded trace file may take once unpacked             |
| ATTNVIZ_MAX_LAYERS       | 128               | most layers a trace may have (a model, an uploaded file)       |
| ATTNVIZ_MAX_HEADS        | 128               | most heads per layer a trace may have                          |
| ATTNVIZ_HEAVY_RUNS       | 2                 | sessions computing a trace or a Masks experiment at once       |
| ATTNVIZ_PROFILES_DIR     | profiles          | the folder whose head profiles the Corpus page lists           |
| ATTNVIZ_CACHE_DIR        | ~/.cache/attnviz  | where the default view's trace is kept for a fast cold start   |

Hosted mode is on wherever strangers can reach the dashboard, unless ATTNVIZ_HOSTED=0 opts out: on Streamlit
Community Cloud (its containers check the repository out under /mount/src and set HOSTNAME=streamlit) and when
the server listens on anything but a loopback address (`--server.address 0.0.0.0`; the UI tells this module the
address with `serving_on`, since only attnviz.ui may import streamlit). Elsewhere (a notebook, `streamlit run`
with the committed config, which binds 127.0.0.1) it is off unless ATTNVIZ_HOSTED=1.

The token limit defaults to what the machine serves quickly: 512 tokens on a CPU (256 hosted, where many
sessions share it) and 4,096 with a GPU (a trace stores q and k, not tokens² per head, so long texts fit); a
model's own position limit caps it further.

The layer and head limits are over every model the dashboard is meant for (the largest open models have about
126 layers and 128 heads; the hosted allow-list far fewer): they bound what a trace file may declare, so a file a
few kB long cannot make the dashboard build a million layer records. Heavy runs past ATTNVIZ_HEAVY_RUNS wait their
turn with a message (attnviz.ui.heavy): each one holds a few hundred MB at its peak, so this bounds a replica's
memory and keeps its cores answering the light pages (docs/deploy.md sizes a pod from it).

torch's thread count (`torch_threads`) follows OMP_NUM_THREADS, the variable torch itself reads at start, when it is
set: a host running one process per core (a test runner's workers, a replica pinned to one core) sets 1 so that its
processes do not fight over the cores; else the cores, at most 4. The dashboard gives it to work on a long text
and keeps a short one on one thread (attnviz.ui.threads).

The values are read on every call (a few dictionary look-ups), so a test or an operator can change the
environment of a running process and the next request sees it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")
_SERVED: dict[str, str | None] = {}  # "address": what the running server binds ("" or None: every interface)


@dataclass(frozen=True)
class Settings:
    hosted: bool
    allowed_models: tuple[str, ...]
    max_tokens: int
    max_model_bytes: int
    trace_cache_bytes: int
    max_upload_bytes: int
    max_layers: int = 128
    max_heads: int = 128
    heavy_runs: int = 2
    profiles_dir: str = "profiles"
    cache_dir: str = "~/.cache/attnviz"


def _number(name: str, default: float) -> float:
    raw = os.environ.get(name, "").strip()
    try:
        value = float(raw) if raw else default
    except ValueError:
        value = default  # a typo in a deployment variable must not take the dashboard down
    return value if value > 0 else default


def current() -> Settings:
    """The settings in force now."""
    chosen = os.environ.get("ATTNVIZ_HOSTED", "").strip().lower()
    hosted = chosen in _TRUE or (chosen not in _FALSE and reachable_by_strangers())
    allowed = tuple(m.strip() for m in os.environ.get("ATTNVIZ_ALLOWED_MODELS", "").split(",") if m.strip())
    return Settings(
        hosted=hosted,
        allowed_models=allowed,
        max_tokens=int(_number("ATTNVIZ_MAX_TOKENS", _default_tokens(hosted))),
        max_model_bytes=int(_number("ATTNVIZ_MAX_MODEL_MB", 1500) * 2**20),
        trace_cache_bytes=int(_number("ATTNVIZ_TRACE_CACHE_MB", 1024) * 2**20),
        max_upload_bytes=int(_number("ATTNVIZ_MAX_UPLOAD_MB", 64 if hosted else 256) * 2**20),
        max_layers=max(1, int(_number("ATTNVIZ_MAX_LAYERS", 128))),
        max_heads=max(1, int(_number("ATTNVIZ_MAX_HEADS", 128))),
        heavy_runs=max(1, int(_number("ATTNVIZ_HEAVY_RUNS", 2))),
        profiles_dir=os.environ.get("ATTNVIZ_PROFILES_DIR", "").strip() or "profiles",
        cache_dir=os.environ.get("ATTNVIZ_CACHE_DIR", "").strip() or _cache_home(),
    )


def _cache_home() -> str:
    """attnviz's folder in the user's cache ($XDG_CACHE_HOME, else ~/.cache)."""
    return os.path.join(os.environ.get("XDG_CACHE_HOME", "").strip() or "~/.cache", "attnviz")


def torch_threads() -> int:
    """The thread count the dashboard and the benchmarks give torch: OMP_NUM_THREADS when set, else the cores (at most
    4)."""
    return int(_number("OMP_NUM_THREADS", max(1, min(4, os.cpu_count() or 1))))


def _default_tokens(hosted: bool) -> int:
    import torch

    if torch.cuda.is_available():
        return 4096
    return 256 if hosted else 512


def serving_on(address: str | None) -> None:
    """Record the address the dashboard's server binds (Streamlit's resolved `server.address`)."""
    _SERVED["address"] = address


def reachable_by_strangers() -> bool:
    """On Streamlit Community Cloud, or served on a non-loopback address (unset: every interface)."""
    if on_community_cloud():
        return True
    if "address" not in _SERVED:
        return False  # no server (a notebook, a script): whoever calls the API is on this machine
    address = (_SERVED["address"] or "").strip().strip("[]").lower()
    return not (address == "localhost" or address == "::1" or address.startswith("127."))


def on_community_cloud() -> bool:
    """Streamlit Community Cloud checks the repository out under /mount/src/<repo> and names its hosts
    "streamlit"; either sign is enough (the path is the one its tracebacks show)."""
    here = os.path.realpath(__file__).replace(os.sep, "/")
    return here.startswith("/mount/src/") or os.environ.get("HOSTNAME", "") == "streamlit"
