"""A trace file's zip directory and npy headers read within bounds, before any array is unpacked.

The zip directory gives every member's unpacked size (`ZipInfo.file_size`), so a file that would take more than the
byte budget is refused before any inflation; the first bytes of each member give its npy header (dtype and shape),
so ranks, dtypes and counts are checked before any array is read (a few kB can declare a million layers or heads in
arrays of one token). Object arrays are refused from their header: pickles are never loaded.
"""

from __future__ import annotations

import dataclasses
import io
import math
import re
import zipfile

import numpy as np

from ..errors import InputError

RECORD_BYTES = 4 * 2**20  # the JSON record unpacked; numpy stores text at 4 bytes a character
LOAD_BYTES = 2 * 2**30  # what `load_npz` unpacks at most unless told otherwise (the dashboard passes less)
MAX_LAYERS = 1024  # what `load_npz` opens at most unless told otherwise: beyond every model (the dashboard passes less)
MAX_HEADS = 1024
MAX_MEMBERS = 8 * MAX_LAYERS  # format 2 writes up to 12 arrays per layer, most layers 5 (q, k, norms, values, norms)
HEAD_BYTES = 16_384  # read of each member for its npy header (numpy caps a header at 10,000 characters)
UNREAD = ("scaled", "masked")  # format 1: recomputed from scores, headers checked, data never unpacked
WHOLE = ("provenance.json", "scores", "scaled", "masked", "weights", "mask")  # members of the whole trace
#: member kind -> (dtype kinds it may have, ranks it may have); "u": bfloat16's raw bits (uint16, format 2)
KINDS = {
    "provenance.json": ("U", (0,)),
    "scores": ("f", (4,)),
    "scaled": ("f", (4,)),
    "masked": ("f", (4,)),
    "weights": ("f", (4,)),
    "mask": ("b", (3,)),
}
#: the same for the members of one layer, named `<kind>_<layer>`
LAYER_KINDS = {
    "bias": ("f", (3,)),
    "sinks": ("f", (1, 2)),
    "softcap": ("f", (0,)),
    "values": ("fu", (3,)),
    "output_norms": ("f", (2,)),
    "q": ("fu", (3,)),
    "k": ("fu", (3,)),
    "scores": ("fu", (3,)),
    "norms": ("f", (3,)),
    "mask_keys": ("b", (1,)),
    "mask_flips": ("i", (1,)),
    "mask_cells": ("b", (2,)),
}
_NAME = re.compile(rf"({'|'.join(map(re.escape, WHOLE))}|(?:{'|'.join(LAYER_KINDS)})_\d{{1,6}})\.npy")
_WHAT = {
    "f": "floating-point numbers",
    "b": "true/false values",
    "U": "text",
    "i": "whole numbers",
    "O": "Python objects (attnviz never loads those)",
}


@dataclasses.dataclass(frozen=True)
class Member:
    """One array of the file as its zip entry and npy header describe it, before it is unpacked."""

    name: str
    info: zipfile.ZipInfo
    shape: tuple[int, ...]
    dtype: np.dtype


@dataclasses.dataclass(frozen=True)
class Limits:
    """What a trace file may declare: tokens (queries or keys; None: any), layers, heads, and bytes once unpacked."""

    tokens: int | None = None
    bytes: int = LOAD_BYTES
    layers: int = MAX_LAYERS
    heads: int = MAX_HEADS


def refused(why: str) -> InputError:
    return InputError(f"This is not an attnviz trace file (.npz saved on the Export page): {why}.")


def split(name: str) -> tuple[str, int | None]:
    """(kind, layer) of a member's name: ("q", 3) for q_3, ("weights", None) for a member of the whole trace."""
    if name in WHOLE:
        return name, None
    kind, _, layer = name.rpartition("_")
    return kind, int(layer)


def open_zip(data) -> zipfile.ZipFile:
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise refused("expected the file's bytes")
    try:
        return zipfile.ZipFile(io.BytesIO(data))
    except Exception:  # noqa: BLE001 - not a zip at all
        raise refused("it is not a zip archive") from None


def directory(zf: zipfile.ZipFile, max_bytes: int) -> dict[str, zipfile.ZipInfo]:
    """The members by name, from the zip directory alone: known names, no repeats, sizes within the budget."""
    infos = zf.infolist()
    if len(infos) > MAX_MEMBERS:
        raise refused(f"it holds {len(infos):,} files")
    found = {}
    for info in infos:
        match = _NAME.fullmatch(info.filename)
        if match is None:
            raise refused("it holds a file the Export page does not write")
        if match.group(1) in found:
            raise refused(f"it holds {match.group(1)} twice")
        found[match.group(1)] = info
    if "provenance.json" not in found:
        raise refused("it lacks the provenance record")
    if found["provenance.json"].file_size > RECORD_BYTES:
        raise refused(f"its provenance record would take over {RECORD_BYTES // 2**20} MB")
    total = sum(i.file_size for n, i in found.items() if n not in UNREAD)
    if total > max_bytes:
        raise InputError(
            f"This trace would take {total / 2**20:,.0f} MB once unpacked; this dashboard opens traces of up to "
            f"{max_bytes / 2**20:,.0f} MB. Open it in Python with attnviz.export.load_npz."
        )
    return found


def headers(zf: zipfile.ZipFile, infos: dict[str, zipfile.ZipInfo]) -> dict[str, Member]:
    """Every member's npy header (at most HEAD_BYTES unpacked each), with its dtype and rank checked."""
    out = {}
    for name, info in infos.items():
        with zf.open(info) as f:
            head = io.BytesIO(f.read(HEAD_BYTES))
        try:
            version = np.lib.format.read_magic(head)
            reader = {(1, 0): np.lib.format.read_array_header_1_0, (2, 0): np.lib.format.read_array_header_2_0}
            shape, _, dtype = reader[version](head)
        except (ValueError, KeyError):
            raise refused(f"its {name} member is not a numpy array") from None
        kind, layer = split(name)
        kinds, ranks = (KINDS if layer is None else LAYER_KINDS)[kind]
        plain = not (dtype.hasobject or dtype.fields is not None or dtype.subdtype is not None)
        if not plain or dtype.kind not in kinds or (dtype.kind == "u" and dtype.itemsize != 2):
            got = _WHAT.get("O" if dtype.hasobject else dtype.kind, f"values of type {dtype.name}")
            raise refused(f"its {name} array holds {got}, not {_WHAT[kinds[0]]}")
        if len(shape) not in ranks or any(n < 0 for n in shape):
            raise refused(f"its {name} array has {len(shape)} axes, not {' or '.join(map(str, ranks))}")
        if head.tell() + math.prod(shape) * dtype.itemsize > info.file_size:
            raise refused(f"its {name} array is cut short")
        out[name] = Member(name, info, tuple(shape), dtype)
    return out


def check_counts(dims: tuple[int, int, int, int], limits: Limits) -> None:
    """Layers, heads and tokens within the limits, said in our words with the limit."""
    n_layer, n_head, n_query, n_key = dims
    if min(dims) < 1:
        raise refused("its arrays are empty")
    check_layer_count(n_layer, limits)
    if n_head > limits.heads:
        raise _too_many(n_head, limits.heads, "heads")
    if limits.tokens is not None and max(n_query, n_key) > limits.tokens:
        raise InputError(
            f"This trace has {n_query:,} queries x {n_key:,} keys; this dashboard opens traces of up to "
            f"{limits.tokens:,} tokens. Open it in Python with attnviz.export.load_npz."
        )


def check_layer_count(n_layer: int, limits: Limits) -> None:
    if n_layer > limits.layers:
        raise _too_many(n_layer, limits.layers, "layers")


def _too_many(n: int, most: int, what: str) -> InputError:
    return InputError(
        f"This trace has {n:,} {what}; attnviz opens traces of up to {most:,} {what} here. "
        "A model with that many is beyond what this dashboard draws."
    )


def array(zf: zipfile.ZipFile, m: Member, as_float32: bool = True) -> np.ndarray:
    """One member unpacked (once), as the header said; floats as float32 unless `as_float32` is False."""
    with zf.open(m.info) as f:
        a = np.lib.format.read_array(f, allow_pickle=False)
    if a.shape != m.shape or a.dtype != m.dtype:
        raise refused(f"its {m.name} array changed between reads")
    return np.asarray(a, np.float32 if as_float32 and m.dtype.kind == "f" else None, order="C")
