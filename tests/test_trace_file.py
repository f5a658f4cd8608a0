"""Reading a trace file from anyone (attnviz.trace.file): bounded before anything is unpacked, and every malformed
file refused with a clear InputError in attnviz's words, never numpy's (with its advice to load pickles)."""

from __future__ import annotations

import io
import json
import math
import pickle
import struct
import tracemalloc
import zipfile

import numpy as np
import pytest
from helpers import deflate_bomb, make_trace, npz_members, npz_of

from attnviz import export
from attnviz.errors import InputError
from attnviz.trace import file as trace_file

TOKENS = ["[CLS]", "a", '"', "b", "[SEP]"]


@pytest.fixture(scope="module")
def saved() -> bytes:
    return export.trace_npz(make_trace(TOKENS, n_layer=2, n_head=3, causal=True), text='a " b')


@pytest.fixture(scope="module")
def saved_weights_only() -> bytes:
    return export.trace_npz(make_trace(TOKENS, n_layer=2, n_head=3, only_weights=True))


def _altered(data: bytes, change) -> bytes:
    members = npz_members(data)
    change(members)
    return npz_of(members)


def _record(**changes):
    return lambda m: m["provenance.json"].update(changes)


def _set(name, value):
    return lambda m: m.update({name: value(m) if callable(value) else value})


def _zip(**members: bytes) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, body in members.items():
            zf.writestr(name, body)
    return buf.getvalue()


ALTERED = {  # name -> (change to a valid file, words the message must hold)
    "record as a list": (_set("provenance.json", [1, 2]), "not a JSON object"),
    "record not JSON": (_set("provenance.json", np.array("{not json")), "not JSON"),
    "record nested too deep": (_set("provenance.json", np.array("[" * 100_000 + "]" * 100_000)), "not JSON"),
    "record without tokens": (lambda m: m["provenance.json"].pop("tokens"), "tokens"),
    "record without format": (lambda m: m["provenance.json"].pop("format"), "format"),
    "record of another format": (_record(format="![x](https://example.com/p.png)"), "attnviz-trace/1"),
    "options not pairs": (_record(options="causal"), "options"),
    "versions as a list": (_record(versions=[1]), "versions"),
    "tokens do not match": (_record(tokens=["a"]), "tokens"),
    "scores of rank 3": (_set("scores", lambda m: m["scores"][0]), "scores array has 3 axes"),
    "mask of rank 2": (_set("mask", lambda m: m["mask"][0]), "mask array has 2 axes"),
    "string mask": (_set("mask", lambda m: m["mask"].astype(str)), "mask array holds text"),
    "integer scores": (
        _set("scores", lambda m: m["scores"].astype(np.int64)),
        "scores array holds values of type int64",
    ),
    "stages of two shapes": (_set("weights", lambda m: m["weights"][:, :2]), "differ in shape"),
    "mask of other tokens": (_set("mask", lambda m: m["mask"][:, :3]), "mask array does not fit"),
    "bias for a layer it lacks": (_set("bias_7", lambda m: m["scores"][0]), "bias_7 array does not fit"),
    "too few scales": (_record(scale=[0.25]), "one scale for each of its 2 layers"),
    "scales as text": (_record(scale=["0.25", "0.25"]), "one scale for each"),
    "a NaN scale": (_record(scale=[float("nan"), 0.25]), "scale must be a finite"),
    "a scale of 1e30": (_record(scale=[1e30, 0.25]), "scale must be a finite"),
    "a NaN fill": (_record(fill=[float("nan"), -1e9]), "one fill"),
    "scores and no mask": (lambda m: m.pop("mask"), "disagree"),
    "weights only, says the record": (_record(**{"weights_only": True}), "disagree"),  # the file format's field
    "no weights": (lambda m: m.pop("weights"), "lacks the provenance record or the weights"),
    "a member it does not write": (_set("extra", np.zeros(3)), "does not write"),
    "weights of object dtype": (_set("weights", np.array([{"a": 1}, None], dtype=object)), "Python objects"),
    "scores holding NaN": (_set("scores", lambda m: m["scores"] * np.nan), "NaN or infinite"),
}

WHOLE = {  # name -> (file, words the message must hold)
    "not a zip": (b"not a zip at all", "not a zip archive"),
    "a pickle": (pickle.dumps({"weights": [1, 2]}), "not a zip archive"),
    "a zip of garbage": (
        _zip(**{"weights.npy": b"\x93NUMPY garbage", "provenance.json.npy": b"x" * 64}),
        "not a numpy array",
    ),  # fmt: skip
    "a zip of text files": (_zip(**{"notes.txt": b"hello"}), "does not write"),
}


def _refusal(data: bytes, **limits) -> str:
    with pytest.raises(InputError) as e:
        trace_file.open_npz(data, **limits)
    message = str(e.value)
    assert "pickle" not in message.lower() and "numpy.load" not in message and "Traceback" not in message
    return message


@pytest.mark.parametrize("name", list(ALTERED))
def test_a_malformed_trace_file_is_refused_with_a_clear_message(saved, name):
    change, words = ALTERED[name]
    assert words in _refusal(_altered(saved, change)), name


def test_files_that_are_no_trace_at_all_are_refused_with_a_clear_message(saved):
    cases = dict(WHOLE)
    with zipfile.ZipFile(io.BytesIO(saved)) as zf:
        weights = zf.read("weights.npy")
    twice = io.BytesIO()
    with zipfile.ZipFile(twice, "w") as zf:
        zf.writestr("weights.npy", weights)
        with pytest.warns(UserWarning, match="Duplicate name"):
            zf.writestr("weights.npy", weights)
    cases["the same member twice"] = (twice.getvalue(), "weights twice")
    cases["cut in half"] = (saved[: len(saved) // 2], "not a zip archive")
    cases["a member cut short"] = (_shortened(saved), "scores array is cut short")
    cases["a member's data corrupted"] = (_corrupted(saved), "damaged or cut short")
    for name, (data, words) in cases.items():
        assert words in _refusal(data), name


def _shortened(data: bytes) -> bytes:
    """The file with its scores member's data cut by one float, the header and directory left honest."""
    members = npz_members(data)
    raw = io.BytesIO()
    np.lib.format.write_array(raw, members.pop("scores"))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("scores.npy", raw.getvalue()[:-4])
    with zipfile.ZipFile(io.BytesIO(npz_of(members))) as src, zipfile.ZipFile(out, "a") as zf:
        for info in src.infolist():
            zf.writestr(info.filename, src.read(info))
    return out.getvalue()


def _corrupted(data: bytes) -> bytes:
    """The file with one byte of its scores member's compressed data (past the npy header) flipped."""
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        info = zf.getinfo("scores.npy")
    name_len, extra_len = struct.unpack("<HH", data[info.header_offset + 26 : info.header_offset + 30])
    start = info.header_offset + 30 + name_len + extra_len  # past the local header: the compressed data
    at = start + info.compress_size - 8
    return data[:at] + bytes([data[at] ^ 0xFF]) + data[at + 1 :]


def test_a_header_claiming_more_data_than_the_member_holds_is_refused_before_reading(saved):
    members = npz_members(saved)
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        header, {"descr": "<f4", "fortran_order": False, "shape": (2, 3, 10**6, 10**6)}
    )
    data = npz_of({k: v for k, v in members.items() if k != "scores"})
    with zipfile.ZipFile(io.BytesIO(data)) as src:
        out = io.BytesIO()
        with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zf:
            for info in src.infolist():
                zf.writestr(info.filename, src.read(info))
            zf.writestr("scores.npy", header.getvalue() + bytes(64))
    assert "scores array is cut short" in _refusal(out.getvalue())


def test_an_upload_bomb_is_refused_from_the_zip_directory_without_unpacking(saved):
    record = npz_members(saved)["provenance.json"]
    bomb = deflate_bomb(record)  # 0.9 MB that numpy would inflate to 900 MB
    assert len(bomb) < 2**20
    with zipfile.ZipFile(io.BytesIO(bomb)) as zf:
        assert zf.getinfo("weights.npy").file_size > 900 * 2**20  # what np.load would allocate and inflate
    tracemalloc.start()
    try:
        message = _refusal(bomb, max_tokens=512, max_bytes=256 * 2**20)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert "900 MB once unpacked" in message and "up to 256 MB" in message
    assert peak < 50 * 2**20, f"{peak / 2**20:.0f} MB allocated while refusing"


def test_the_token_limit_is_checked_from_the_headers(saved):
    message = _refusal(saved, max_tokens=4)
    assert "5 queries x 5 keys" in message and "up to 4 tokens" in message
    assert trace_file.open_npz(saved, max_tokens=5)[0].n_tokens == 5


def test_a_record_over_its_size_limit_is_refused(saved):
    huge = _altered(saved, _record(text="x" * (trace_file.RECORD_BYTES // 4)))
    assert "provenance record would take over 4 MB" in _refusal(huge)


def test_a_valid_file_opens_once_with_its_record_and_the_quote_token(saved, saved_weights_only):
    trace, record = trace_file.open_npz(saved, max_tokens=512, max_bytes=2**20)
    assert trace.tokens == tuple(TOKENS) and record["text"] == 'a " b'
    assert record == json.loads(str(np.load(io.BytesIO(saved))["provenance.json"]))
    assert math.isclose(trace.scale[0], 0.25)
    wo, record = trace_file.open_npz(saved_weights_only)
    assert not wo.has("scores") and record["weights_only"] and export.load_npz(saved_weights_only).n_layer == 2


@pytest.mark.parametrize("kind", ["regular", "weights only"])
def test_a_weights_only_record_gives_no_scales(saved_weights_only, saved, kind):
    data = saved_weights_only if kind == "weights only" else saved
    members = npz_members(data)
    if kind == "weights only":
        members["provenance.json"]["scale"] = [[1]]
        assert "scales or fills" in _refusal(npz_of(members))
    else:
        members["provenance.json"]["scale_on"] = ["sideways", "q"]
        assert "scale_on" in _refusal(npz_of(members))
