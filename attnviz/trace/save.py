"""The trace file written (format 2): what the record stores, not its stages, so the file grows with the tokens and a
reopened trace can do all the original could (read back within bounds by attnviz.trace.file, beside it).

Per recorded layer i: `q_i` [head, query, d_head] and `k_i` [kv_head, key, d_head] as the model used them (key/value
heads not expanded), or `scores_i` [head, query, key] where the layer keeps scores instead (a score function that is
no dot product, stage arrays); `norms_i` [2, head, query] (each row's largest masked score and log-sum after it: the
weights of a key window); the mask's structure (its band in the record's `masks`, the visible keys `mask_keys_i`, the
exceptions `mask_flips_i`, or the dense `mask_cells_i` where no structure fits; a layer whose mask is an earlier
layer's says `same_as`); `bias_i`, `sinks_i`, `softcap_i` where the model has them; and `values_i` [kv_head, key,
d_value] with `output_norms_i` [head, key] when the trace keeps values. Tensors keep their dtype; bfloat16, which npy
cannot hold, is stored as its raw 16 bits (uint16) and named in the record's `bfloat16`. Scale, fill and scale_on are
in the record (`provenance.json`). A trace of given weights stores `weights` [layer, head, query, key] float32.
"""

from __future__ import annotations

import io
import json

import numpy as np
import torch

from .file_layers import FORMAT as NPZ_FORMAT
from .layers import LayerRecord
from .mask import StructuredMask
from .record import AttentionTrace


def write_npz(trace: AttentionTrace, record: dict) -> bytes:
    """The trace as .npz (format 2, above) with `record` (what produced it: attnviz.export.provenance_record) as
    provenance.json. A 512-token trace of the bundled model takes about 5% of the dense stages' bytes."""
    out, bf16, masks = {}, [], []
    if not trace.has("scores"):
        out["weights"] = np.asarray(trace.stage("weights"), np.float32)
    else:
        for i, layer in enumerate(trace.layers):
            masks.append(_mask(out, i, layer.mask, trace.layers[:i]))
            _layer(out, bf16, i, layer, trace.has("values"))
    record = {**record, "format": NPZ_FORMAT, "masks": masks or None, "bfloat16": bf16}
    out["provenance.json"] = np.array(json.dumps(record, ensure_ascii=False))
    buf = io.BytesIO()
    np.savez_compressed(buf, **out)
    return buf.getvalue()


def _layer(out: dict, bf16: list, i: int, layer: LayerRecord, values: bool) -> None:
    tensors = {"q": layer.q, "k": layer.k} if layer.scores is None else {"scores": layer.scores}
    tensors.update(norms=torch.stack([layer.norms.max.float(), layer.norms.log_sum.float()]))
    tensors.update(bias=layer.bias, sinks=layer.sinks)
    if values:  # every layer keeps them (trace.has("values")), so a reopened file draws value-weighted attention
        tensors.update(values=layer.values.v, output_norms=layer.values.written)
    for part, t in tensors.items():
        if t is not None:
            out[f"{part}_{i}"] = _array(t, f"{part}_{i}", bf16)
    if layer.softcap is not None:
        out[f"softcap_{i}"] = np.array(layer.softcap, np.float64)


def _array(t: torch.Tensor, name: str, bf16: list) -> np.ndarray:
    """The tensor on the host in its own dtype; bfloat16 as its raw bits (uint16), its member named in `bf16`."""
    t = t.detach().cpu().contiguous()
    if t.dtype == torch.bfloat16:
        bf16.append(name)
        return t.view(torch.int16).numpy().view(np.uint16)
    return t.numpy()


def _mask(out: dict, i: int, mask: StructuredMask, earlier) -> dict:
    """Layer i's mask in the record, its arrays as members; an earlier layer's very structure named by its index."""
    for j, layer in enumerate(earlier):
        if layer.mask is mask or layer.mask.same_as(mask):
            return {"same_as": j}
    for part in ("keys", "flips", "cells"):
        if getattr(mask, part) is not None:
            out[f"mask_{part}_{i}"] = getattr(mask, part).cpu().numpy()
    return {"ahead": mask.ahead, "behind": mask.behind}
