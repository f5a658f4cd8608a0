"""What a head takes from each token, not only where it looks (Kobayashi et al. 2020, "Attention is not only a weight").

A weight says how much of key j's value a query takes, not how large that value is: a key whose value vector is small
(an attention sink above all) can take most of a row's weight and still add almost nothing to the output. The size
of what head h at query i takes from key j, in the residual stream, is ||weight[h, i, j] * v[h, j] @ W_O[h]||, where
W_O[h] is the slice of the output projection that head h feeds; the output projection's bias is left out, as
Kobayashi et al. do (it is the same for every key). Since ||w * x|| = |w| * ||x||, it is the weight times a
[head, key] table the trace keeps (`trace.output_norms`), read through the trace's one read path: a layer's value
norms cost less than its stages (only the weights are computed, in place).
"""

from __future__ import annotations

import numpy as np
import torch

from .. import checks
from ..errors import InputError
from ..trace import AttentionTrace
from ..trace.reads import frozen
from ..trace.window_cache import remembered

#: The value-weighted view's stage name in the pages and their URLs (its numbers: `value_share`).
VALUE_WEIGHTED = "value-weighted"
#: The two views of where a head's attention goes, beside every weights heatmap: rows of each sum to 1.
VIEWS = ("weights", VALUE_WEIGHTED)


def _norms(trace: AttentionTrace, layer: int, heads, queries, keys) -> torch.Tensor:
    """[head, query, key] float32 tensor where the trace lives: |weight| * ||v @ W_O[h]||."""
    if not trace.has("values"):
        raise InputError(trace.why_not("values"))
    with torch.inference_mode():
        weights = trace.weights_tensor(layer, heads=heads, queries=queries, keys=keys)  # >= 0, its own, no other stage
        written = trace.output_norms(layer, heads=heads, keys=keys, device=True)
        return weights.mul_(written.to(weights.device)[:, None, :])  # in place: a long text's layer is large


@checks.public(name="attnviz.analysis.values.value_norms")
def value_norms(trace: AttentionTrace, layer: int, heads=None, queries=None, keys=None) -> np.ndarray:
    """float32 [head, query, key]: ||weight[h, i, j] * v[h, j] @ W_O[h]||, the vector head h at query i takes from key
    j, in the residual stream (Kobayashi et al. 2020; the output projection's bias left out, as they do).

    heads, queries, keys: as `trace.stages` (None: all; (start, stop) windows). An InputError says why when the trace
    keeps no values (weights-only families, families whose attention code attnviz reads for q and k only)."""
    return frozen(_norms(trace, layer, heads, queries, keys))


def value_share_tensor(trace: AttentionTrace, layer: int, heads=None, queries=None, keys=None) -> torch.Tensor:
    """`value_share` as a float32 tensor where the trace lives (for pooling there)."""
    norms = _norms(trace, layer, heads, queries, None)  # the row totals need every key the query may see
    total = norms.sum(-1, keepdim=True).clamp_(min=torch.finfo(torch.float32).tiny)  # a row that sees nothing stays 0
    share = norms.div_(total)
    if keys is None:
        return share
    start, stop = max(0, int(keys[0])), min(trace.n_keys, int(keys[1]))
    if start >= stop:
        raise InputError(f"The keys window {keys[0]}..{keys[1]} holds none of the {trace.n_keys} positions.")
    return share[..., start:stop]


def value_share(trace: AttentionTrace, layer: int, heads=None, queries=None, keys=None) -> np.ndarray:
    """float32 [head, query, key]: `value_norms` with each row scaled to sum to 1 over the keys the query may see
    (masked keys have weight 0, so they take no share): value-weighted attention, comparable with the weights.

    A key window gives that window's part of each whole row (its cells sum to at most 1)."""
    with torch.inference_mode():
        return frozen(value_share_tensor(trace, layer, heads, queries, keys))


@remembered  # every session's revisit of a view reads it once
def attention_view(trace: AttentionTrace, layer: int, view: str = "weights", heads=None, queries=None, keys=None):
    """float32 [head, query, key] of one of VIEWS: the weights, or value-weighted attention (`value_share`).

    heads, queries, keys: as `trace.stages`; only the heads and query rows asked for are computed (value-weighted rows
    need every key for their totals, never other heads or rows). An InputError says why when a trace cannot give it."""
    if view == VALUE_WEIGHTED:
        return value_share(trace, layer, heads, queries, keys)
    if view != "weights":
        raise InputError(f"Unknown view {view!r}: choose one of {', '.join(VIEWS)}.")
    return trace.stages(layer, heads=heads, queries=queries, keys=keys).weights
