"""How many tokens a trace of a loaded model can hold on the device it runs on.

A trace keeps, per attention layer and per token, q for every query head and k (and v, when the model's output
projections were found) for every key/value head, in the model's dtype on its device, each row's two softmax
normalisers per head and, with values, what each head writes from each key (float32): memory linear in the tokens
(the mask is kept by its structure). The device's free memory, of which a trace may take TRACE_SHARE, bounds the
tokens; the rest is left to the forward pass itself and to other sessions.
"""

from __future__ import annotations

import os

import torch

from .load import LoadedModel

TRACE_SHARE = 0.5  # of the free memory a trace may take
NORM_BYTES = 2 * 4  # two float32 row normalisers per head and query (attnviz.trace.row_norms)
#: A trace keeps its values unless they would take it past this many bytes (values=True keeps them anyway): a
#: Llama-3-8B-shaped model at 32,768 tokens holds 12.38 GiB with its values, 10.25 GiB without (docs/benchmarks.md).
VALUES_BUDGET = 12 * 2**30


def trace_bytes_per_token(loaded: LoadedModel) -> int:
    """Bytes a trace of `loaded` holds per token: sum over attention layers of (query heads + key/value heads, twice
    that many key/value heads with values) x head dim x the dtype's size, plus the row normalisers and, with values,
    one float32 per head for what it writes."""
    itemsize = torch.finfo(getattr(torch, loaded.dtype)).bits // 8
    n_kv = int(getattr(loaded.model.config, "num_key_value_heads", None) or loaded.n_head)
    n_layer = len(loaded.attention_modules) or loaded.n_layer
    values = bool(loaded.outputs)  # values are kept only where each layer's output projection was found
    vectors = (loaded.n_head + n_kv * (2 if values else 1)) * loaded.d_head * itemsize
    return n_layer * (vectors + loaded.n_head * (NORM_BYTES + (4 if values else 0)))


def free_bytes(device: str) -> int:
    """Free memory of `device`: the GPU's (torch.cuda.mem_get_info), else the host's available memory."""
    if str(device).startswith("cuda") and torch.cuda.is_available():
        return int(torch.cuda.mem_get_info(torch.device(device))[0])
    try:  # the kernel's own estimate of what can be allocated without swapping (Linux)
        with open("/proc/meminfo", encoding="ascii") as f:
            fields = dict(line.split(":", 1) for line in f if ":" in line)
        return int(fields["MemAvailable"].split()[0]) * 1024
    except (OSError, KeyError, ValueError):  # pragma: no cover - another system
        return int(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))


def device_tokens(loaded: LoadedModel, budget: int | None = None) -> tuple[int, int]:
    """(most tokens a trace may hold, the memory budget in bytes): `budget` when given (a hosted server's fixed
    budget), else TRACE_SHARE of the device's free memory."""
    budget = int(TRACE_SHARE * free_bytes(loaded.device)) if budget is None else int(budget)
    return max(2, budget // max(1, trace_bytes_per_token(loaded))), budget


def values_left_out(loaded: LoadedModel, n_tokens: int, values: bool | None = None) -> str | None:
    """Why a trace of n_tokens tokens keeps no values, as a clause; None when it keeps them. values: True keeps them,
    False leaves them out, None (the default) keeps them unless the trace would then hold more than VALUES_BUDGET."""
    if values is not None:
        return None if values else "values were left out on request (values=False)"
    with_values = trace_bytes_per_token(loaded) * n_tokens
    if not loaded.outputs or with_values <= VALUES_BUDGET:
        return None
    return (
        f"values are left out of a trace that would hold more than {VALUES_BUDGET / 2**30:.0f} GiB with them "
        f"(this one {with_values / 2**30:.1f} GiB; trace with values=True to keep them)"
    )
