"""Every ATTNVIZ_* setting, read from the environment in this one place.

| variable                 | default           | meaning                                                        |
|--------------------------|-------------------|----------------------------------------------------------------|
| ATTNVIZ_HOSTED           | off               | only the bundled model and the allow-list load; no folders     |
| ATTNVIZ_ALLOWED_MODELS   | empty             | comma-separated hub ids a hosted dashboard may load            |
| ATTNVIZ_MAX_TOKENS       | see below         | the cap on the sidebar's Token limit (longest text traced)    |
| ATTNVIZ_MAX_MODEL_MB     | 1500              | weights larger than this are refused before loading            |
| ATTNVIZ_TRACE_CACHE_MB   | 1024              | byte budget of the dashboard's trace cache, all sessions       |

The token limit defaults to what the machine serves quickly: 512 tokens on a CPU (256 hosted, where many
sessions share it) and 4,096 with a GPU (a trace stores q and k, not tokens² per head, so long texts fit); a
model's own position limit caps it further.

The values are read on every call (a few dictionary look-ups), so a test or an operator can change the
environment of a running process and the next request sees it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

_TRUE = ("1", "true", "yes", "on")


@dataclass(frozen=True)
class Settings:
    hosted: bool
    allowed_models: tuple[str, ...]
    max_tokens: int
    max_model_bytes: int
    trace_cache_bytes: int


def _number(name: str, default: float) -> float:
    raw = os.environ.get(name, "").strip()
    try:
        value = float(raw) if raw else default
    except ValueError:
        value = default  # a typo in a deployment variable must not take the dashboard down
    return value if value > 0 else default


def current() -> Settings:
    """The settings in force now."""
    hosted = os.environ.get("ATTNVIZ_HOSTED", "").strip().lower() in _TRUE
    allowed = tuple(m.strip() for m in os.environ.get("ATTNVIZ_ALLOWED_MODELS", "").split(",") if m.strip())
    return Settings(
        hosted=hosted,
        allowed_models=allowed,
        max_tokens=int(_number("ATTNVIZ_MAX_TOKENS", _default_tokens(hosted))),
        max_model_bytes=int(_number("ATTNVIZ_MAX_MODEL_MB", 1500) * 2**20),
        trace_cache_bytes=int(_number("ATTNVIZ_TRACE_CACHE_MB", 1024) * 2**20),
    )


def _default_tokens(hosted: bool) -> int:
    import torch

    if torch.cuda.is_available():
        return 4096
    return 256 if hosted else 512
