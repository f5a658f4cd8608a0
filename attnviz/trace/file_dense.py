"""Trace files of format 1 (attnviz-trace/1, dense stages) and of given weights (either format), read back.

Format 1 stores every stage [layer, head, query, key] float32 (`scores`, `scaled`, `masked`, `weights`), the dense
`mask` [layer, query, key] and per layer `bias_i`, `sinks_i`, `softcap_i`, `values_i` and `output_norms_i`. It is
rebuilt from its scores with the saved scale, mask and fill, so only the headers of `scaled` and `masked` are read;
the saved weights are read to check the recomputation against them (a difference is said in the trace's notes). A
trace of given weights holds `weights` alone, in format 1 as in format 2.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from ..attention import check_scale
from .file_bounds import Limits, Member, check_counts, refused, split
from .layers import LayerRecord, Values

FORMAT = "attnviz-trace/1"
PER_LAYER_VALUES = ("values", "output_norms")  # saved for every layer or none (traces that keep values)
SAVED_WITHOUT_VALUES = (
    "the trace file was saved without value vectors (the trace kept none, or an older attnviz saved it)"
)


def check_shapes(members: dict[str, Member], limits: Limits) -> tuple[int, int, int, int]:
    """(layers, heads, queries, keys) that every array agrees on, within the limits."""
    if "weights" not in members:
        raise refused("it lacks the weights, or the queries and keys of its layers")
    n_layer, n_head, n_query, n_key = dims = members["weights"].shape
    check_counts(dims, limits)
    if any(members[n].shape != dims for n in ("scores", "scaled", "masked") if n in members):
        raise refused("its stage arrays differ in shape")
    expected = {
        "mask": [(n_layer, n_query, n_key)],
        "bias": [(n_head, n_query, n_key), (1, n_query, n_key)],
        "sinks": [(n_head,), (n_head, n_query)],
        "softcap": [()],
        "output_norms": [(n_head, n_key)],
    }
    for name, m in members.items():
        kind, layer = split(name)
        fits = m.shape in expected.get(kind, [m.shape]) and (kind != "values" or value_heads(m.shape, n_head, n_key))
        known = layer is None or kind in (*expected, *PER_LAYER_VALUES)
        if not known or not fits or m.dtype.kind == "u" or (layer is not None and layer >= n_layer):
            raise refused(f"its {name} array does not fit {n_layer} layers, {n_head} heads, {n_query} x {n_key} tokens")
    saved = {f"{kind}_{i}" for kind in PER_LAYER_VALUES for i in range(n_layer)} & set(members)
    if saved and (len(saved) != 2 * n_layer or "scores" not in members):
        raise refused("it holds values for some layers only, or values without scores")
    return dims


def value_heads(shape: tuple[int, ...], n_head: int, n_key: int) -> bool:
    """Whether values [kv_head, key, d_value] fit: key/value heads that divide the heads, one row per key."""
    kv, keys, width = shape
    return kv >= 1 and n_head % kv == 0 and keys == n_key and width >= 1


def check_stored(rec: dict, names: set[str]) -> None:
    stored = {"scores", "mask"} & names
    if rec["weights_only"] != (not stored) or stored not in (set(), {"scores", "mask"}):
        raise refused("its record and its arrays disagree on whether it holds scores and a mask")


def records(arrays: dict, rec: dict) -> tuple[tuple[LayerRecord, ...], str | None]:
    """(the layers rebuilt from the saved scores, a note when their weights differ from the saved ones)."""
    if not np.isfinite(arrays["scores"]).all():
        raise refused("its scores hold NaN or infinite values")
    layers = tuple(_layer_record(arrays, rec, i) for i in range(arrays["scores"].shape[0]))
    gap = max(
        float(np.max(np.abs(_weights(layer) - arrays["weights"][i]), initial=0)) for i, layer in enumerate(layers)
    )
    note = f"Recomputed on this machine, the weights differ from the saved ones by up to {gap:.1e}." if gap else None
    return layers, note


def _weights(layer: LayerRecord) -> np.ndarray:
    with torch.inference_mode():
        return layer.stages().weights.numpy()


def _layer_record(arrays: dict, rec: dict, i: int) -> LayerRecord:
    opt = lambda name: torch.from_numpy(arrays[f"{name}_{i}"]) if f"{name}_{i}" in arrays else None  # noqa: E731
    softcap = float(arrays[f"softcap_{i}"]) if f"softcap_{i}" in arrays else None
    if softcap is not None and not (math.isfinite(softcap) and softcap > 0):
        raise refused(f"its softcap of layer {i} is not a positive number")
    return LayerRecord(
        None,
        None,
        check_scale(rec["scale"][i]),
        torch.from_numpy(arrays["mask"][i]),
        float(rec["fill"][i]),
        bias=opt("bias"),
        scores=torch.from_numpy(arrays["scores"][i]),
        softcap=softcap,
        sinks=opt("sinks"),
        scale_on=(rec.get("scale_on") or ["scores"] * (i + 1))[i],
        values=checked_values(arrays, i),
        no_values=SAVED_WITHOUT_VALUES,
    )


def checked_values(arrays: dict, i: int) -> Values | None:
    """Layer i's saved values and output norms (||v W_O||, never negative), or None when the file has none."""
    if f"values_{i}" not in arrays:
        return None
    v, written = arrays[f"values_{i}"], arrays[f"output_norms_{i}"]
    finite = isinstance(v, torch.Tensor) or np.isfinite(v).all()  # a tensor: checked by the caller (format 2)
    if not (finite and np.isfinite(written).all() and (written >= 0).all()):
        raise refused(f"its values or output norms of layer {i} hold NaN, infinite or negative numbers")
    return Values(v if isinstance(v, torch.Tensor) else torch.from_numpy(v), torch.from_numpy(written))
