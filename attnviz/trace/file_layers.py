"""Trace files of format 2 (attnviz-trace/2, written by attnviz.trace.save): each layer's record read back.

What each member holds is said in attnviz.trace.save. Here every member's shape is checked against the others from
the npy headers (heads, queries, keys, the key/value heads that divide the heads, one d_head for q and k) before any
array is read, the record's mask entries and bfloat16 names against the members, then the arrays against what a
layer record needs (finite vectors, sorted exceptions inside the mask). The layers come back as they were recorded:
q and k in their own dtype, the mask by its structure, each row's norms as saved, so every read of the reopened
trace gives what the original's gave.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from ..attention import check_scale
from .file_bounds import Limits, Member, check_counts, check_layer_count, refused, split
from .file_dense import SAVED_WITHOUT_VALUES, checked_values, value_heads
from .layers import LayerRecord
from .mask import StructuredMask
from .row_norms import RowNorms

FORMAT = "attnviz-trace/2"
VECTORS = ("q", "k", "scores")  # what a layer's scores are made from: q and k, or the scores themselves
RAW_BITS = ("q", "k", "scores", "values")  # members that may hold bfloat16's raw bits
MASK_PARTS = ("keys", "flips", "cells")


def holds_layers(names) -> bool:
    """Whether a file's members are format 2's layers (rather than format 1's dense stages or given weights)."""
    return any(split(n)[0] in VECTORS and split(n)[1] is not None for n in names)


def check_layer_names(names, limits: Limits) -> int:
    """The number of layers the members' names declare, within the limits, from the zip directory alone."""
    n_layer = 1 + max(split(n)[1] for n in names if split(n)[0] in VECTORS and split(n)[1] is not None)
    check_layer_count(n_layer, limits)
    return n_layer


def check_shapes(members: dict[str, Member], limits: Limits, n_layer: int) -> tuple[int, int, int, int]:
    """(layers, heads, queries, keys) that every member agrees on, within the limits."""
    first = members.get("q_0") or members.get("scores_0")
    if first is None or ("q_0" in members and "k_0" not in members):
        raise refused("its layer 0 holds neither queries and keys nor scores")
    n_head, n_query = first.shape[:2]
    dims = (n_layer, n_head, n_query, members["k_0"].shape[1] if "q_0" in members else first.shape[2])
    check_counts(dims, limits)
    for i in range(n_layer):
        held = {kind for kind in (*VECTORS, "norms") if f"{kind}_{i}" in members}
        if held not in ({"q", "k", "norms"}, {"scores", "norms"}):
            raise refused(f"its layer {i} needs q, k and norms, or scores and norms")
    for name, m in members.items():
        kind, layer = split(name)
        if name != "provenance.json" and (layer is None or layer >= n_layer or not _fits(m, kind, members, dims)):
            raise refused(
                f"its {name} array does not fit {n_layer} layers, {n_head} heads, {dims[2]} x {dims[3]} tokens"
            )
    saved = {f"{kind}_{i}" for kind in ("values", "output_norms") for i in range(n_layer)} & set(members)
    if saved and len(saved) != 2 * n_layer:
        raise refused("it holds values for some layers only")
    return dims


def _fits(m: Member, kind: str, members: dict, dims: tuple[int, int, int, int]) -> bool:
    _, n_head, n_query, n_key = dims
    if m.dtype.kind == "u" and kind not in RAW_BITS:
        return False
    if kind == "q":
        return m.shape[:2] == (n_head, n_query) and m.shape[2] >= 1
    if kind == "k":
        d_head = members[m.name.replace("k_", "q_", 1)].shape[2]
        return m.shape[1:] == (n_key, d_head) and m.shape[0] >= 1 and n_head % m.shape[0] == 0
    if kind == "values":
        return value_heads(m.shape, n_head, n_key)
    expected = {
        "scores": [(n_head, n_query, n_key)],
        "norms": [(2, n_head, n_query)],
        "bias": [(n_head, n_query, n_key), (1, n_query, n_key)],
        "sinks": [(n_head,), (n_head, n_query)],
        "softcap": [()],
        "output_norms": [(n_head, n_key)],
        "mask_keys": [(n_key,)],
        "mask_cells": [(n_query, n_key)],
    }
    return kind == "mask_flips" or m.shape in expected[kind]


def check_record(rec: dict, members: dict[str, Member], dims: tuple[int, int, int, int]) -> None:
    """The record's bfloat16 names and mask entries against the members."""
    if rec["weights_only"]:
        raise refused("its record says weights only, but it holds layers")
    raw = sorted(n for n, m in members.items() if m.dtype.kind == "u")
    if not isinstance(rec.get("bfloat16"), list) or sorted(map(str, rec["bfloat16"])) != raw:
        raise refused("its record's bfloat16 does not name exactly its arrays of raw 16-bit numbers")
    masks = rec.get("masks")
    if not isinstance(masks, list) or len(masks) != dims[0]:
        raise refused(f"its record does not give one mask for each of its {dims[0]} layers")
    for i, entry in enumerate(masks):
        if not _mask_entry(entry, i, masks, dims[2] + dims[3]):
            raise refused(f"its record's mask of layer {i} is malformed")
        parts = {p for p in MASK_PARTS if f"mask_{p}_{i}" in members}
        band = isinstance(entry, dict) and (entry.get("ahead") is not None or entry.get("behind") is not None)
        if ("same_as" in entry and parts) or ("cells" in parts and (band or len(parts) > 1)):
            raise refused(f"its mask of layer {i} holds parts that cannot go together")


def _mask_entry(entry, i: int, masks: list, reach: int) -> bool:
    """{"same_as": an earlier layer with a mask of its own} or {"ahead": limit, "behind": limit} (ints or None)."""
    if not isinstance(entry, dict):
        return False
    if set(entry) == {"same_as"}:
        j = entry["same_as"]
        return isinstance(j, int) and not isinstance(j, bool) and 0 <= j < i and "same_as" not in masks[j]
    limit = lambda v: v is None or (isinstance(v, int) and not isinstance(v, bool) and abs(v) <= reach)  # noqa: E731
    return set(entry) == {"ahead", "behind"} and limit(entry["ahead"]) and limit(entry["behind"])


def records(arrays: dict, rec: dict, dims: tuple[int, int, int, int]) -> tuple[LayerRecord, ...]:
    """Every layer as it was recorded; masks that layers shared are shared again."""
    masks, out = [], []
    for i, entry in enumerate(rec["masks"]):
        masks.append(masks[entry["same_as"]] if "same_as" in entry else _mask(arrays, i, entry, dims[2], dims[3]))
        out.append(_layer(arrays, rec, i, masks[i]))
    return tuple(out)


def _tensor(arrays: dict, rec: dict, name: str) -> torch.Tensor | None:
    """A member as a tensor in its own dtype (raw bits named in the record as bfloat16), None when absent."""
    if name not in arrays:
        return None
    a = arrays[name]
    return torch.from_numpy(a.view(np.int16)).view(torch.bfloat16) if name in rec["bfloat16"] else torch.from_numpy(a)


def _finite(arrays: dict, rec: dict, name: str, what: str) -> torch.Tensor | None:
    """`_tensor(name)` after checking that it holds no NaN or infinity (in numpy: torch's check is slower on a CPU
    shared by many threads); bfloat16's raw bits are infinite or NaN where all eight exponent bits are set."""
    a = arrays.get(name)
    if a is not None:
        bad = (a & 0x7F80) == 0x7F80 if name in rec["bfloat16"] else ~np.isfinite(a)
        if bad.any():
            raise refused(f"its {what} of layer {name.rpartition('_')[2]} hold NaN or infinite values")
    return _tensor(arrays, rec, name)


def _layer(arrays: dict, rec: dict, i: int, mask: StructuredMask) -> LayerRecord:
    get = lambda name: _tensor(arrays, rec, f"{name}_{i}")  # noqa: E731
    finite = lambda name, what: _finite(arrays, rec, f"{name}_{i}", what)  # noqa: E731
    norms = get("norms")  # -inf where a row sees no key and the fill is -inf
    if bool(np.isnan(arrays[f"norms_{i}"]).any() or np.isposinf(arrays[f"norms_{i}"]).any()):
        raise refused(f"its row norms of layer {i} hold NaN or infinite values")
    softcap = float(arrays[f"softcap_{i}"]) if f"softcap_{i}" in arrays else None
    if softcap is not None and not (math.isfinite(softcap) and softcap > 0):
        raise refused(f"its softcap of layer {i} is not a positive number")
    if f"values_{i}" in arrays:  # checked as format 1 checks them, the values in their own dtype
        arrays = {**arrays, f"values_{i}": finite("values", "values")}
    return LayerRecord(
        finite("q", "queries"),
        finite("k", "keys"),
        check_scale(rec["scale"][i]),
        mask,
        float(rec["fill"][i]),
        bias=finite("bias", "bias"),
        scores=finite("scores", "scores"),
        softcap=softcap,
        sinks=finite("sinks", "sinks"),
        scale_on=rec["scale_on"][i],
        norms=RowNorms(norms[0].float(), norms[1].float()),
        values=checked_values(arrays, i),
        no_values=SAVED_WITHOUT_VALUES,
    )


def _mask(arrays: dict, i: int, entry: dict, n_query: int, n_key: int) -> StructuredMask:
    parts = {p: arrays.get(f"mask_{p}_{i}") for p in MASK_PARTS}
    flips = parts["flips"]
    if flips is not None:
        flips = flips.astype(np.int64)
        if flips.size and (flips[0] < 0 or flips[-1] >= n_query * n_key or (np.diff(flips) <= 0).any()):
            raise refused(f"its mask exceptions of layer {i} are not sorted cells of the mask")
    tensor = lambda a: None if a is None else torch.from_numpy(a)  # noqa: E731
    return StructuredMask(
        n_query,
        n_key,
        torch.device("cpu"),
        entry["ahead"],
        entry["behind"],
        tensor(parts["keys"]),
        tensor(flips),
        tensor(parts["cells"]),
    )
