"""The part of a trace's read path about values: what each head writes from each key and the values themselves.

AttentionTrace takes these methods from `ValueReads`, so the trace's own class stays the stages and what they are made
from; both read through the same checked heads and windows (attnviz.trace.reads).
"""

from __future__ import annotations

import numpy as np
import torch

from .. import checks
from ..errors import InputError, check_index
from .layers import weights_alone
from .reads import frozen, head_index, span


class ValueReads:
    """Reads of a trace's values and the weights alone that value norms multiply (see attnviz.analysis.values)."""

    def _values_of(self, layer: int):
        """The layer's Values, or an InputError that says in words why the trace has none."""
        if not self.has("values"):
            raise InputError(self.why_not("values"))
        return self.layers[check_index("layer", layer, self.n_layer)].values

    @checks.public(name="AttentionTrace.output_norms")
    def output_norms(self, layer: int, heads=None, keys=None, *, device: bool = False) -> np.ndarray:
        """[head, key] float32: ||v[h, j] @ W_O[h]||, the size of what head h writes into the residual stream from key j
        per unit of weight (kept while tracing; attnviz.analysis.values turns it into value norms). keys: (start, stop).
        device=True: a float32 tensor where the trace lives."""
        values = self._values_of(layer)
        out = values.output_norms(head_index(heads, self.n_head), span("keys", keys, self.n_keys))
        return out if device else frozen(out)

    def weights_tensor(self, layer: int, heads=None, queries=None, keys=None, *, out=None) -> torch.Tensor:
        """`stages(layer, heads, queries, keys, device=True).weights` (a float32 tensor of its own where the trace
        lives) without computing the other three stages: what value norms multiply. out: a float32 tensor of that
        shape where the trace lives to write them into (a corpus profile's reused memory)."""
        record = self.layers[check_index("layer", layer, self.n_layer)]
        rows, cols = span("queries", queries, self.n_tokens), span("keys", keys, self.n_keys)
        with torch.inference_mode():
            return weights_alone(record, head_index(heads, self.n_head), rows, cols, out)

    @checks.public(name="AttentionTrace.values")
    def values(self, layer: int, head: int) -> np.ndarray:
        """v [key, d_value] of one head as the model used it (value heads shared out as the model shares them)."""
        values = self._values_of(layer)
        with torch.inference_mode():
            return frozen(values.of_heads(head_index(check_index("head", head, self.n_head), self.n_head))[0])

    def value_heads(self, layer: int) -> np.ndarray:
        """v [kv_head, key, d_value] float32 of every key/value head as kept (heads that share one not expanded; see
        `values` for one query head's): with `output_norms`, what a saved trace file needs for value-weighted views."""
        values = self._values_of(layer)
        with torch.inference_mode():
            return frozen(values.v.float())
