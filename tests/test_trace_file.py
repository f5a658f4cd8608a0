"""Reading a trace file from anyone (attnviz.trace.file): bounded before anything is unpacked, and every malformed
file refused with a clear InputError in attnviz's words, never numpy's (with its advice to load pickles). Files of
format 2 (what attnviz.trace.save writes) and of format 1 (dense stages: tests/data, written by the format-1 writer)."""

from __future__ import annotations

import io
import json
import math
import pickle
import struct
import tracemalloc
import zipfile
from pathlib import Path

import numpy as np
import pytest
from helpers import deflate_bomb, make_trace, npz_members, npz_of, vector_trace

from attnviz import export
from attnviz.errors import InputError
from attnviz.trace import file as trace_file

TOKENS = ["[CLS]", "a", '"', "b", "[SEP]"]
#: format 1 as attnviz wrote it before format 2: 4 tokens, 2 layers, 3 heads, causal; bias, softcap, sinks
FORMAT_1 = (Path(__file__).parent / "data" / "format1_toy.npz").read_bytes()


@pytest.fixture(scope="module")
def saved() -> bytes:
    """Format 2: layer 0 float32, layer 1 bfloat16 (raw bits), 4 heads sharing 2 key/value heads, a hidden key."""
    return export.trace_npz(vector_trace(TOKENS), text='a " b')


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


ALTERED_1 = {  # name -> (change to a valid format-1 file, words the message must hold)
    "record as a list": (_set("provenance.json", [1, 2]), "not a JSON object"),
    "record not JSON": (_set("provenance.json", np.array("{not json")), "not JSON"),
    "record nested too deep": (_set("provenance.json", np.array("[" * 100_000 + "]" * 100_000)), "not JSON"),
    "record without tokens": (lambda m: m["provenance.json"].pop("tokens"), "tokens"),
    "record without format": (lambda m: m["provenance.json"].pop("format"), "format"),
    "record of another format": (_record(format="![x](https://example.com/p.png)"), "attnviz-trace/1 or"),
    "format 1 arrays, format 2 record": (_record(format="attnviz-trace/2"), "its record says attnviz-trace/2"),
    "options not pairs": (_record(options="causal"), "options"),
    "versions as a list": (_record(versions=[1]), "versions"),
    "tokens do not match": (_record(tokens=["a"]), "tokens"),
    "scores of rank 3": (_set("scores", lambda m: m["scores"][0]), "scores array has 3 axes"),
    "mask of rank 2": (_set("mask", lambda m: m["mask"][0]), "mask array has 2 axes"),
    "string mask": (_set("mask", lambda m: m["mask"].astype(str)), "mask array holds text"),
    "integer scores": (
        _set("scores", lambda m: m["scores"].astype(np.int64)),
        "scores array holds whole numbers",
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
    "no weights": (lambda m: m.pop("weights"), "lacks the weights, or the queries and keys"),
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


def _pop_layer_1(m):
    del m["q_1"], m["k_1"], m["norms_1"], m["values_1"], m["output_norms_1"]


ALTERED_2 = {  # name -> (change to a valid format-2 file, words the message must hold)
    "record without format": (lambda m: m["provenance.json"].pop("format"), "format"),
    "format 2 arrays, format 1 record": (_record(format="attnviz-trace/1"), "its record says attnviz-trace/1"),
    "tokens do not match": (_record(tokens=["a"]), "tokens"),
    "q of rank 2": (_set("q_0", lambda m: m["q_0"][0]), "q_0 array has 2 axes"),
    "q of other tokens": (_set("q_0", lambda m: m["q_0"][:, :3]), "array does not fit"),
    "k heads that do not divide the heads": (_set("k_0", lambda m: m["k_0"][[0, 1, 1]]), "k_0 array does not fit"),
    "k of another d_head": (_set("k_0", lambda m: m["k_0"][..., :2]), "k_0 array does not fit"),
    "k of other keys": (_set("k_0", lambda m: m["k_0"][:, :4]), "array does not fit"),
    "integer q": (_set("q_0", lambda m: m["q_0"].astype(np.int32)), "q_0 array holds whole numbers"),
    "q as 8-bit raw bits": (_set("q_0", lambda m: m["q_0"].view(np.uint8)), "values of type uint8"),
    "raw bits in the norms": (_set("norms_0", lambda m: m["norms_0"].view(np.uint32)[..., :1]), "uint32"),
    "a layer without k": (lambda m: m.pop("k_1"), "layer 1 needs q, k and norms"),
    "a layer without norms": (lambda m: m.pop("norms_0"), "layer 0 needs q, k and norms"),
    "q and scores in one layer": (_set("scores_0", np.zeros((4, 5, 5), np.float32)), "layer 0 needs"),
    "a layer missing in between": (_set("q_3", lambda m: m["q_0"]), "layer 2 needs"),
    "a layer missing at the start": (lambda m: [m.pop(f"{k}_0") for k in ("q", "k")], "layer 0 holds neither"),
    "norms of other heads": (_set("norms_1", lambda m: m["norms_1"][:, :3]), "norms_1 array does not fit"),
    "weights beside the layers": (_set("weights", np.ones((2, 4, 5, 5), np.float32)), "weights array does not"),
    "bias of other keys": (_set("bias_0", np.zeros((4, 5, 4), np.float32)), "bias_0 array does not fit"),
    "values of one layer only": (lambda m: m.pop("values_1"), "values for some layers only"),
    "values of other keys": (_set("values_0", lambda m: m["values_0"][:, :4]), "values_0 array does not fit"),
    "negative output norms": (_set("output_norms_0", lambda m: -1 - m["output_norms_0"]), "negative"),
    "queries holding NaN": (_set("q_0", lambda m: m["q_0"] * np.nan), "queries of layer 0 hold NaN"),
    "keys holding inf": (_set("k_0", lambda m: m["k_0"] + np.inf), "keys of layer 0 hold NaN or infinite"),
    "norms holding NaN": (_set("norms_1", lambda m: m["norms_1"] * np.nan), "row norms of layer 1 hold NaN"),
    "bfloat16 not named": (_record(bfloat16=[]), "bfloat16 does not name exactly"),
    "bfloat16 naming a float": (_record(bfloat16=["q_0", "q_1", "k_1", "values_1"]), "bfloat16 does not name"),
    "bfloat16 as text": (_record(bfloat16="q_1"), "bfloat16 does not name"),
    "no masks": (_record(masks=None), "one mask for each of its 2 layers"),
    "one mask too few": (_record(masks=[{"ahead": 0, "behind": None}]), "one mask for each"),
    "a mask the same as a later layer's": (_record(masks=[{"same_as": 1}, {"same_as": 0}]), "mask of layer 0 is"),
    "a mask the same as itself": (_record(masks=[{"ahead": 0, "behind": None}, {"same_as": 1}]), "malformed"),
    "a band beyond the tokens": (_record(masks=[{"ahead": 10**9, "behind": None}, {"same_as": 0}]), "malformed"),
    "a band of text": (_record(masks=[{"ahead": "0", "behind": None}, {"same_as": 0}]), "malformed"),
    "a mask with extra fields": (_record(masks=[{"ahead": 0, "behind": None, "x": 1}, {"same_as": 0}]), "malformed"),
    "a shared mask with parts": (_set("mask_keys_1", np.ones(5, bool)), "cannot go together"),
    "cells beside a band": (_set("mask_cells_0", np.ones((5, 5), bool)), "cannot go together"),
    "string mask keys": (_set("mask_keys_0", lambda m: m["mask_keys_0"].astype(str)), "mask_keys_0 array holds text"),
    "mask keys of other tokens": (_set("mask_keys_0", np.ones(4, bool)), "mask_keys_0 array does not fit"),
    "exceptions out of order": (_set("mask_flips_0", np.array([7, 3])), "not sorted cells of the mask"),
    "exceptions past the mask": (_set("mask_flips_0", np.array([25])), "not sorted cells of the mask"),
    "exceptions as floats": (_set("mask_flips_0", np.array([1.0])), "holds floating-point numbers, not whole"),
    "weights only, says the record": (_record(**{"weights_only": True}), "says weights only"),
    "no scale_on": (_record(scale_on=None), "scale_on"),
    "a scale of 1e30": (_record(scale=[1e30, 0.25]), "scale must be a finite"),
    "a layer past the limit by name": (lambda m: _pop_layer_1(m) or m.update(q_1500=m["q_0"]), "1,501 layers"),
}


@pytest.mark.parametrize("name", list(ALTERED_1))
def test_a_malformed_format_1_file_is_refused_with_a_clear_message(name):
    change, words = ALTERED_1[name]
    assert words in _refusal(_altered(FORMAT_1, change)), name


@pytest.mark.parametrize("name", list(ALTERED_2))
def test_a_malformed_format_2_file_is_refused_with_a_clear_message(saved, name):
    change, words = ALTERED_2[name]
    assert words in _refusal(_altered(saved, change)), name


def test_files_that_are_no_trace_at_all_are_refused_with_a_clear_message(saved):
    cases = dict(WHOLE)
    with zipfile.ZipFile(io.BytesIO(saved)) as zf:
        q = zf.read("q_0.npy")
    twice = io.BytesIO()
    with zipfile.ZipFile(twice, "w") as zf:
        zf.writestr("q_0.npy", q)
        with pytest.warns(UserWarning, match="Duplicate name"):
            zf.writestr("q_0.npy", q)
    cases["the same member twice"] = (twice.getvalue(), "q_0 twice")
    cases["cut in half"] = (saved[: len(saved) // 2], "not a zip archive")
    cases["a member cut short"] = (_shortened(saved, "q_0"), "q_0 array is cut short")
    cases["a member's data corrupted"] = (_corrupted(saved, "q_0"), "damaged or cut short")
    cases["a format-1 member cut short"] = (_shortened(FORMAT_1, "scores"), "scores array is cut short")
    cases["a format-1 member corrupted"] = (_corrupted(FORMAT_1, "scores"), "damaged or cut short")
    for name, (data, words) in cases.items():
        assert words in _refusal(data), name


def _shortened(data: bytes, name: str) -> bytes:
    """The file with one member's data cut by one float, the header and directory left honest."""
    members = npz_members(data)
    raw = io.BytesIO()
    np.lib.format.write_array(raw, members.pop(name))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr(f"{name}.npy", raw.getvalue()[:-4])
    with zipfile.ZipFile(io.BytesIO(npz_of(members))) as src, zipfile.ZipFile(out, "a") as zf:
        for info in src.infolist():
            zf.writestr(info.filename, src.read(info))
    return out.getvalue()


def _corrupted(data: bytes, name: str) -> bytes:
    """The file with one byte of one member's compressed data (past the npy header) flipped."""
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        info = zf.getinfo(f"{name}.npy")
    name_len, extra_len = struct.unpack("<HH", data[info.header_offset + 26 : info.header_offset + 30])
    start = info.header_offset + 30 + name_len + extra_len  # past the local header: the compressed data
    at = start + info.compress_size - 8
    return data[:at] + bytes([data[at] ^ 0xFF]) + data[at + 1 :]


def test_a_header_claiming_more_data_than_the_member_holds_is_refused_before_reading(saved):
    members = npz_members(saved)
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {"descr": "<f4", "fortran_order": False, "shape": (4, 10**6, 10**6)})
    data = npz_of({k: v for k, v in members.items() if k != "q_0"})
    with zipfile.ZipFile(io.BytesIO(data)) as src:
        out = io.BytesIO()
        with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zf:
            for info in src.infolist():
                zf.writestr(info.filename, src.read(info))
            zf.writestr("q_0.npy", header.getvalue() + bytes(64))
    assert "q_0 array is cut short" in _refusal(out.getvalue())


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
