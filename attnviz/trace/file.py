"""A saved trace (.npz from `attnviz.trace.save.trace_npz`) read back within bounds: the file may come from anyone.

Nothing is unpacked before it is checked. The zip directory gives every member's unpacked size
(`ZipInfo.file_size`), so a file that would take more than the byte budget is refused before any inflation;
the first bytes of each member give its npy header (dtype and shape), so ranks, dtypes, the counts of layers, heads
and tokens and the agreement between the arrays are checked before any array is read or any layer record built (a
few kB can declare a million layers or heads in arrays of one token). Then each member is unpacked once, pickles
never (object arrays are refused from their header), the JSON record's size is capped and every field of it is
checked (scales as the API checks them, `check_scale`). Every failure is an InputError saying what is wrong,
in our words: numpy's and zipfile's (with their advice to load pickles) never reach a user.

`scaled` and `masked` are recomputed from `scores` with the saved scale, mask and fill, so only their headers
are read; the saved weights are read to check the recomputation against them. Values and output norms, saved for
traces that keep them, come back as they were, so a reopened trace draws value-weighted attention too.
"""

from __future__ import annotations

import dataclasses
import io
import json
import math
import re
import zipfile
from typing import get_args

import numpy as np
import torch

from .. import checks
from ..attention import check_scale
from ..errors import ArgumentTypeError, InputError
from .layers import ScaleOn
from .record import AttentionTrace, LayerRecord, Provenance, Values

NPZ_FORMAT = "attnviz-trace/1"
RECORD_BYTES = 4 * 2**20  # the JSON record unpacked; numpy stores text at 4 bytes a character
LOAD_BYTES = 2 * 2**30  # what `load_npz` unpacks at most unless told otherwise (the dashboard passes less)
MAX_MEMBERS = 1024  # a trace file holds 6 arrays plus at most 5 per layer
MAX_LAYERS = 1024  # what `load_npz` opens at most unless told otherwise: beyond every model (the dashboard passes less)
MAX_HEADS = 1024
HEAD_BYTES = 16_384  # read of each member for its npy header (numpy caps a header at 10,000 characters)
UNREAD = ("scaled", "masked")  # recomputed from scores: headers checked, data never unpacked
SCALE_ON = get_args(ScaleOn)

_NAME = re.compile(
    r"(provenance\.json|scores|scaled|masked|weights|mask|(?:bias|sinks|softcap|values|output_norms)_\d{1,6})\.npy"
)
PER_LAYER_VALUES = ("values", "output_norms")  # saved for every layer or none (traces that keep values)
#: member kind -> (dtype kinds it may have, ranks it may have)
_KINDS = {
    "provenance.json": ("U", (0,)),
    "scores": ("f", (4,)),
    "scaled": ("f", (4,)),
    "masked": ("f", (4,)),
    "weights": ("f", (4,)),
    "mask": ("b", (3,)),
    "bias": ("f", (3,)),
    "sinks": ("f", (1, 2)),
    "softcap": ("f", (0,)),
    "values": ("f", (3,)),
    "output_norms": ("f", (2,)),
}
_WHAT = {
    "f": "floating-point numbers",
    "b": "true/false values",
    "U": "text",
    "O": "Python objects (attnviz never loads those)",
}


@dataclasses.dataclass(frozen=True)
class Member:
    """One array of the file as its zip entry and npy header describe it, before it is unpacked."""

    name: str
    info: zipfile.ZipInfo
    shape: tuple[int, ...]
    dtype: np.dtype


def refused(why: str) -> InputError:
    return InputError(f"This is not an attnviz trace file (.npz saved on the Export page): {why}.")


@dataclasses.dataclass(frozen=True)
class Limits:
    """What a trace file may declare: tokens (queries or keys; None: any), layers, heads, and bytes once unpacked."""

    tokens: int | None = None
    bytes: int = LOAD_BYTES
    layers: int = MAX_LAYERS
    heads: int = MAX_HEADS


def read_npz(data: bytes, max_tokens: int | None = None, max_bytes: int = LOAD_BYTES, limits: Limits | None = None):
    """(checked JSON record, arrays as float32 / bool) of a file written by `export.trace_npz`.

    Refused before any array is unpacked: more than `max_bytes` to unpack, more than `max_tokens` queries or keys,
    more layers or heads than `limits` allows, members, ranks or dtypes the Export page does not write. `limits`,
    when given, replaces `max_tokens` and `max_bytes`. Any other failure (a damaged or truncated file) is an
    InputError too.
    """
    limits = limits or Limits(max_tokens, max_bytes)
    try:
        with _open_zip(data) as zf:
            members = _headers(zf, _directory(zf, limits.bytes))
            shape = _check_shapes(members, limits)
            record = check_record(_record(zf, members["provenance.json"]), shape, set(members))
            arrays = {n: _array(zf, m) for n, m in members.items() if n not in (*UNREAD, "provenance.json")}
    except InputError:
        raise
    except Exception:  # noqa: BLE001 - whatever numpy or zipfile says about a broken upload, the user gets ours
        raise refused("it is damaged or cut short") from None
    return record, arrays


def _open_zip(data) -> zipfile.ZipFile:
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise refused("expected the file's bytes")
    try:
        return zipfile.ZipFile(io.BytesIO(data))
    except Exception:  # noqa: BLE001 - not a zip at all
        raise refused("it is not a zip archive") from None


def _directory(zf: zipfile.ZipFile, max_bytes: int) -> dict[str, zipfile.ZipInfo]:
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
    if "provenance.json" not in found or "weights" not in found:
        raise refused("it lacks the provenance record or the weights")
    if found["provenance.json"].file_size > RECORD_BYTES:
        raise refused(f"its provenance record would take over {RECORD_BYTES // 2**20} MB")
    total = sum(i.file_size for n, i in found.items() if n not in UNREAD)
    if total > max_bytes:
        raise InputError(
            f"This trace would take {total / 2**20:,.0f} MB once unpacked; this dashboard opens traces of up to "
            f"{max_bytes / 2**20:,.0f} MB. Open it in Python with attnviz.export.load_npz."
        )
    return found


def _headers(zf: zipfile.ZipFile, infos: dict[str, zipfile.ZipInfo]) -> dict[str, Member]:
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
        kinds, ranks = _KINDS[name.rpartition("_")[0] if name[-1].isdigit() else name]
        if dtype.hasobject or dtype.fields is not None or dtype.subdtype is not None or dtype.kind not in kinds:
            got = _WHAT.get("O" if dtype.hasobject else dtype.kind, f"values of type {dtype.name}")
            raise refused(f"its {name} array holds {got}, not {_WHAT[kinds]}")
        if len(shape) not in ranks or any(n < 0 for n in shape):
            raise refused(f"its {name} array has {len(shape)} axes, not {' or '.join(map(str, ranks))}")
        if head.tell() + math.prod(shape) * dtype.itemsize > info.file_size:
            raise refused(f"its {name} array is cut short")
        out[name] = Member(name, info, tuple(shape), dtype)
    return out


def _check_counts(dims: tuple[int, int, int, int], limits: Limits) -> None:
    """Layers, heads and tokens within the limits, said in our words with the limit."""
    n_layer, n_head, n_query, n_key = dims
    if min(dims) < 1:
        raise refused("its weights array is empty")
    over = [(n_layer, limits.layers, "layers"), (n_head, limits.heads, "heads")]
    for n, most, what in over:
        if n > most:
            raise InputError(
                f"This trace has {n:,} {what}; attnviz opens traces of up to {most:,} {what} here. "
                "A model with that many is beyond what this dashboard draws."
            )
    if limits.tokens is not None and max(n_query, n_key) > limits.tokens:
        raise InputError(
            f"This trace has {n_query:,} queries x {n_key:,} keys; this dashboard opens traces of up to "
            f"{limits.tokens:,} tokens. Open it in Python with attnviz.export.load_npz."
        )


def _check_shapes(members: dict[str, Member], limits: Limits) -> tuple[int, int, int, int]:
    """(layers, heads, queries, keys) that every array agrees on, within the limits."""
    n_layer, n_head, n_query, n_key = dims = members["weights"].shape
    _check_counts(dims, limits)
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
        kind, _, layer = name.rpartition("_") if name[-1].isdigit() else (name, "", "")
        fits = m.shape in expected.get(kind, [m.shape]) and (kind != "values" or _value_heads(m.shape, n_head, n_key))
        if not fits or (layer and int(layer) >= n_layer):
            raise refused(f"its {name} array does not fit {n_layer} layers, {n_head} heads, {n_query} x {n_key} tokens")
    saved = {f"{kind}_{i}" for kind in PER_LAYER_VALUES for i in range(n_layer)} & set(members)
    if saved and (len(saved) != 2 * n_layer or "scores" not in members):
        raise refused("it holds values for some layers only, or values without scores")
    return dims


def _value_heads(shape: tuple[int, ...], n_head: int, n_key: int) -> bool:
    """Whether values [kv_head, key, d_value] fit: key/value heads that divide the heads, one row per key."""
    kv, keys, width = shape
    return kv >= 1 and n_head % kv == 0 and keys == n_key and width >= 1


def _record(zf: zipfile.ZipFile, member: Member) -> dict:
    try:
        record = json.loads(str(_array(zf, member)[()]))
    except (ValueError, RecursionError):
        raise refused("its provenance record is not JSON") from None
    if not isinstance(record, dict):
        raise refused("its provenance record is not a JSON object")
    return record


def _array(zf: zipfile.ZipFile, m: Member) -> np.ndarray:
    """One member unpacked (once), as the header said; floats as float32."""
    with zf.open(m.info) as f:
        a = np.lib.format.read_array(f, allow_pickle=False)
    if a.shape != m.shape or a.dtype != m.dtype:
        raise refused(f"its {m.name} array changed between reads")
    return np.asarray(a, np.float32 if m.dtype.kind == "f" and m.name != "softcap" else None, order="C")


def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _all(values, test, length: int | None = None) -> bool:
    return isinstance(values, list) and (length is None or len(values) == length) and all(map(test, values))


def check_record(rec: dict, dims: tuple[int, int, int, int], names: set[str]) -> dict:
    """`rec` if every field `load_npz` uses has the type and length the arrays need, else an InputError naming it."""
    n_layer, _, n_query, n_key = dims
    if rec.get("format") != NPZ_FORMAT:
        raise refused(f"its record is not of the format {NPZ_FORMAT}")
    is_text = lambda v: isinstance(v, str)  # noqa: E731
    checks = {
        **{k: is_text(rec.get(k)) for k in ("model", "kind", "attn_implementation", "dtype", "device")},
        **{k: rec.get(k) is None or is_text(rec.get(k)) for k in ("revision", "text", "pair")},
        "tokens": _all(rec.get("tokens"), is_text, n_query),
        "key_tokens": _all(rec.get("key_tokens"), is_text, n_key),
        "input_ids": _all(rec.get("input_ids"), lambda v: isinstance(v, int) and not isinstance(v, bool)),
        "n_dropped": isinstance(rec.get("n_dropped"), int) and rec["n_dropped"] >= 0,
        "d_head": isinstance(rec.get("d_head"), int) and rec["d_head"] >= 0,
        "weights_only": isinstance(rec.get("weights_only"), bool),
        "notes": _all(rec.get("notes"), is_text),
        "options": _all(rec.get("options"), lambda o: isinstance(o, list) and len(o) == 2 and is_text(o[0])),
        "versions": isinstance(rec.get("versions", {}), dict),
    }
    bad = [k for k, ok in checks.items() if not ok]
    if bad:
        raise refused(f"its record's {', '.join(bad)}: missing, malformed or not matching the arrays")
    stored = {"scores", "mask"} & names
    if rec["weights_only"] != (not stored) or stored not in (set(), {"scores", "mask"}):
        raise refused("its record and its arrays disagree on whether it holds scores and a mask")
    if not rec["weights_only"]:
        _check_layers(rec, n_layer)
    elif any(rec.get(k) is not None for k in ("scale", "fill", "scale_on")):
        raise refused("its record gives scales or fills for a trace of weights only")
    return rec


def _check_layers(rec: dict, n_layer: int) -> None:
    """One scale (checked as the API checks it), fill and scale_on per layer."""
    if not _all(rec.get("scale"), _is_number, n_layer):
        raise refused(f"its record does not give one scale for each of its {n_layer} layers")
    for i, scale in enumerate(rec["scale"]):
        try:
            check_scale(scale)
        except InputError as e:  # the API's own rule, said of the file
            raise InputError(f"The trace file's scale of layer {i} cannot be used. {e}") from None
    if not _all(rec.get("fill"), lambda f: _is_number(f) and not math.isnan(f) and f != math.inf, n_layer):
        raise refused(f"its record does not give one fill (a number or -inf) for each of its {n_layer} layers")
    if rec.get("scale_on") is not None and not _all(rec["scale_on"], lambda s: s in SCALE_ON, n_layer):
        raise refused(f"its record's scale_on is not one of {', '.join(SCALE_ON)} for each layer")


def _tupled(v):
    return tuple(_tupled(x) for x in v) if isinstance(v, list) else v


def open_npz(
    data: bytes, max_tokens: int | None = None, max_bytes: int = LOAD_BYTES, limits: Limits | None = None
) -> tuple[AttentionTrace, dict]:
    """(the trace saved by `trace_npz`, its record): rebuilt from its scores, scale, mask and fill (or weights)."""
    rec, arrays = read_npz(data, max_tokens, max_bytes, limits)
    names = {f.name for f in dataclasses.fields(Provenance)}
    fields = {k: v for k, v in rec.items() if k in names}
    fields.update(options=tuple((k, _tupled(v)) for k, v in rec["options"]), input_ids=tuple(rec["input_ids"]))
    common = dict(key_tokens=rec["key_tokens"], d_head=rec["d_head"], provenance=Provenance(**fields))
    if rec["weights_only"]:
        why = "the saved trace held only the final weights"
        return AttentionTrace.from_weights(rec["tokens"], arrays["weights"], why, notes=rec["notes"], **common), rec
    if not np.isfinite(arrays["scores"]).all():
        raise refused("its scores hold NaN or infinite values")
    records = tuple(_layer_record(arrays, rec, i) for i in range(arrays["scores"].shape[0]))
    trace = AttentionTrace(rec["tokens"], records, notes=rec["notes"], **common)
    gap = max(
        float(np.max(np.abs(trace.layer(i).weights - arrays["weights"][i]), initial=0)) for i in range(len(records))
    )
    if gap:
        note = f"Recomputed on this machine, the weights differ from the saved ones by up to {gap:.1e}."
        trace = dataclasses.replace(trace, notes=(*trace.notes, note))
    return trace, rec


@checks.public(name="attnviz.export.load_npz")
def load_npz(data: bytes, max_tokens: int | None = None, max_bytes: int = LOAD_BYTES) -> AttentionTrace:
    """The trace saved by `trace_npz` (see `open_npz`)."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise ArgumentTypeError("data", f"data must be the file's bytes, not {type(data).__name__}.")
    checks.whole("max_tokens", max_tokens, low=1, high=checks.MAX_TOKENS, none=True)
    checks.whole("max_bytes", max_bytes, low=1)
    return open_npz(data, max_tokens, max_bytes)[0]


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
        values=_values(arrays, i),
        no_values="the trace file was saved without value vectors (the trace kept none, or an older attnviz saved it)",
    )


def _values(arrays: dict, i: int) -> Values | None:
    """Layer i's saved values and output norms (||v W_O||, never negative), or None when the file has none."""
    if f"values_{i}" not in arrays:
        return None
    v, written = arrays[f"values_{i}"], arrays[f"output_norms_{i}"]
    if not (np.isfinite(v).all() and np.isfinite(written).all() and (written >= 0).all()):
        raise refused(f"its values or output norms of layer {i} hold NaN, infinite or negative numbers")
    return Values(torch.from_numpy(v), torch.from_numpy(written))
