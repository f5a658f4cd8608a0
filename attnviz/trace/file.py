"""A saved trace (.npz from attnviz.trace.save) read back within bounds: the file may come from anyone.

Nothing is unpacked before it is checked (attnviz.trace.file_bounds): the zip directory bounds the bytes, the npy
headers the ranks, dtypes and counts of layers, heads and tokens, and the agreement between the arrays, before any
array is read or any layer record built. Then each member is unpacked once, pickles never, the JSON record's size is
capped and every field of it is checked (scales as the API checks them, `check_scale`). Every failure is an InputError
saying what is wrong, in our words: numpy's and zipfile's (with their advice to load pickles) never reach a user.

Two formats open: format 2 (each layer's record: q, k, the mask's structure, row norms, values; file_layers) and
format 1 (dense stages, recomputed from the saved scores; file_dense). Files of given weights are the same in both.
"""

from __future__ import annotations

import dataclasses
import json
import math
from typing import get_args

from .. import checks
from ..attention import check_scale
from ..errors import ArgumentTypeError, InputError
from . import file_dense, file_layers
from .file_bounds import (  # noqa: F401 - the limits are part of this module's interface
    LOAD_BYTES,
    MAX_HEADS,
    MAX_LAYERS,
    RECORD_BYTES,
    UNREAD,
    Limits,
    array,
    directory,
    headers,
    open_zip,
    refused,
)
from .layers import ScaleOn
from .record import AttentionTrace, Provenance

NPZ_FORMAT = file_layers.FORMAT  # what attnviz.trace.save writes
FORMATS = (file_dense.FORMAT, file_layers.FORMAT)
SCALE_ON = get_args(ScaleOn)


def read_npz(data: bytes, max_tokens: int | None = None, max_bytes: int = LOAD_BYTES, limits: Limits | None = None):
    """(checked JSON record, arrays) of a file written by `export.trace_npz`: format 1's floats as float32, format 2's
    in their own dtype.

    Refused before any array is unpacked: more than `max_bytes` to unpack, more than `max_tokens` queries or keys,
    more layers or heads than `limits` allows, members, ranks or dtypes the Export page does not write. `limits`,
    when given, replaces `max_tokens` and `max_bytes`. Any other failure (a damaged or truncated file) is an
    InputError too.
    """
    limits = limits or Limits(max_tokens, max_bytes)
    try:
        with open_zip(data) as zf:
            infos = directory(zf, limits.bytes)
            layered = file_layers.holds_layers(infos)
            n_layer = file_layers.check_layer_names(infos, limits) if layered else None  # before any header
            members = headers(zf, infos)
            if layered:
                dims = file_layers.check_shapes(members, limits, n_layer)
            else:
                dims = file_dense.check_shapes(members, limits)
            record = check_record(_record(zf, members["provenance.json"]), dims, members)
            wanted = (n for n in members if n not in (*UNREAD, "provenance.json"))
            arrays = {n: array(zf, members[n], as_float32=not layered) for n in wanted}
    except InputError:
        raise
    except Exception:  # noqa: BLE001 - whatever numpy or zipfile says about a broken upload, the user gets ours
        raise refused("it is damaged or cut short") from None
    return record, arrays


def _record(zf, member) -> dict:
    try:
        record = json.loads(str(array(zf, member)[()]))
    except (ValueError, RecursionError):
        raise refused("its provenance record is not JSON") from None
    if not isinstance(record, dict):
        raise refused("its provenance record is not a JSON object")
    return record


def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _all(values, test, length: int | None = None) -> bool:
    return isinstance(values, list) and (length is None or len(values) == length) and all(map(test, values))


def check_record(rec: dict, dims: tuple[int, int, int, int], members: dict) -> dict:
    """`rec` if every field `load_npz` uses has the type and length the arrays need, else an InputError naming it."""
    n_layer, _, n_query, n_key = dims
    if rec.get("format") not in FORMATS:
        raise refused(f"its record is not of the format {' or '.join(FORMATS)}")
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
    if file_layers.holds_layers(members):
        if rec["format"] != file_layers.FORMAT:
            raise refused(f"its arrays are of the format {file_layers.FORMAT}, its record says {rec['format']}")
        file_layers.check_record(rec, members, dims)
    else:
        file_dense.check_stored(rec, set(members))
        if not rec["weights_only"] and rec["format"] != file_dense.FORMAT:
            raise refused(f"its arrays are of the format {file_dense.FORMAT}, its record says {rec['format']}")
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
    on = rec.get("scale_on")
    if (on is not None or rec["format"] != file_dense.FORMAT) and not _all(on, lambda s: s in SCALE_ON, n_layer):
        raise refused(f"its record's scale_on is not one of {', '.join(SCALE_ON)} for each layer")


def _tupled(v):
    return tuple(_tupled(x) for x in v) if isinstance(v, list) else v


def open_npz(
    data: bytes, max_tokens: int | None = None, max_bytes: int = LOAD_BYTES, limits: Limits | None = None
) -> tuple[AttentionTrace, dict]:
    """(the trace saved by `trace_npz`, its record): its layers as recorded (format 2), rebuilt from its scores,
    scale, mask and fill (format 1), or its weights."""
    rec, arrays = read_npz(data, max_tokens, max_bytes, limits)
    names = {f.name for f in dataclasses.fields(Provenance)}
    fields = {k: v for k, v in rec.items() if k in names}
    fields.update(options=tuple((k, _tupled(v)) for k, v in rec["options"]), input_ids=tuple(rec["input_ids"]))
    common = dict(key_tokens=rec["key_tokens"], d_head=rec["d_head"], provenance=Provenance(**fields))
    if rec["weights_only"]:
        why = "the saved trace held only the final weights"
        return AttentionTrace.from_weights(rec["tokens"], arrays["weights"], why, notes=rec["notes"], **common), rec
    notes = tuple(rec["notes"])
    if rec["format"] == file_layers.FORMAT:
        dims = (len(rec["masks"]), 0, len(rec["tokens"]), len(rec["key_tokens"]))
        layers = file_layers.records(arrays, rec, dims)
    else:
        layers, note = file_dense.records(arrays, rec)
        notes += (note,) if note else ()
    return AttentionTrace(rec["tokens"], layers, notes=notes, **common), rec


@checks.public(name="attnviz.export.load_npz")
def load_npz(data: bytes, max_tokens: int | None = None, max_bytes: int = LOAD_BYTES) -> AttentionTrace:
    """The trace saved by `trace_npz` (see `open_npz`)."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise ArgumentTypeError("data", f"data must be the file's bytes, not {type(data).__name__}.")
    checks.whole("max_tokens", max_tokens, low=1, high=checks.MAX_TOKENS, none=True)
    checks.whole("max_bytes", max_bytes, low=1)
    return open_npz(data, max_tokens, max_bytes)[0]
