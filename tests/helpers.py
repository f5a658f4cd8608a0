"""Shared test helpers: run a page in AppTest and decode the Plotly figures it holds.

AppTest has no Plotly API: a chart is attnviz's chart component (attnviz.ui.plotly_view), a "bidi_component" element
whose proto.bytes is the JSON {"figure": ..., "config": ..., "script": ...}, and numpy arrays arrive as base64 typed
arrays ({"dtype": "f4", "bdata": ..., "shape": "13, 13"}).
"""

from __future__ import annotations

import base64
import io
import json
import re
import struct
import zipfile
import zlib
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import torch
from markdown_it import MarkdownIt
from streamlit.testing.v1 import AppTest

from attnviz.attention import stages_from_scores
from attnviz.trace import AttentionTrace, LayerRecord, Provenance, Values
from attnviz.ui.plotly_view import NAME as CHART

APP = str(Path(__file__).resolve().parents[1] / "app.py")


def array(v) -> np.ndarray:
    """A Plotly array value as float64: a base64 typed array or a plain (nested) list, None -> NaN."""
    if isinstance(v, dict) and "bdata" in v:
        a = np.frombuffer(base64.b64decode(v["bdata"]), np.dtype(v["dtype"]).newbyteorder("<"))
        if v.get("shape"):
            a = a.reshape([int(s) for s in str(v["shape"]).split(",")])
        return a.astype(np.float64)
    flat = [np.nan if x is None else x for x in np.ravel(np.array(v, dtype=object))]
    return np.array(flat, dtype=np.float64).reshape(np.shape(v))


def charts(at) -> list[dict]:
    """What every chart on the page sends the browser: {"figure": figure JSON, "config": Plotly's config, "script"}."""
    return [json.loads(el.proto.bytes) for el in at.get("bidi_component") if el.proto.component_name == CHART]


def figures(at) -> dict[str, dict]:
    """Every chart on the page as figure JSON, keyed by layout.meta.figure (or its position)."""
    out = {}
    for i, sent in enumerate(charts(at)):
        fig = sent["figure"]
        meta = fig.get("layout", {}).get("meta") or {}
        out[meta.get("figure", str(i)) if isinstance(meta, dict) else str(i)] = fig
    return out


def heatmaps(fig: dict) -> list[dict]:
    return [t for t in fig["data"] if t.get("type") == "heatmap"]


def click_cells(fig: dict) -> dict:
    """The one-head view's click targets (plots.clickable), which carry its hover text and customdata."""
    (cells,) = [t for t in fig["data"] if t.get("name") == "cells"]
    return cells


def z_arrays(fig: dict) -> list[np.ndarray]:
    """The z matrix of every heatmap trace of a figure, decoded."""
    return [array(t["z"]) for t in heatmaps(fig)]


def run_page(page: str, **state) -> AppTest:
    """A fresh AppTest with `state` put into session state, then `page` opened by the first run (as a link opens it).

    The page is chosen before the first run, so the default Heads page is not drawn first (one run per test, not two:
    before the first run AppTest finds a page by its file name, which is every page's URL path here).
    Sidebar widgets vanish from AppTest's tree after the first rerun under st.navigation (streamlit 1.67),
    so sidebar settings (text, layer, source, m_*) are set here, through session state, not by widgets.
    """
    at = AppTest.from_file(APP, default_timeout=120)
    for key, value in state.items():
        at.session_state[key] = value
    at.switch_page(page).run()
    return at


def shown(markdown: str) -> str:
    """What a reader sees of Markdown whose user text attnviz.ui.literal escaped: the backslash escapes resolved and
    the invisible word joiners dropped (the app's own Markdown, **bold** and all, is left as it is)."""
    return re.sub(r"\\([!-/:-@\[-`{-~])", r"\1", markdown).replace("\u2060", "")


def texts(at, kind: str) -> list[str]:
    """What a reader sees of every element of one kind (markdown, caption, info, ...) in the main area."""
    return [shown(str(e.value)) for e in at.get(kind)]


# --- Markdown as a reader's browser would render it (markdown-it-py: CommonMark, GitHub's tables and strikethrough) --

# GitHub's extended autolinks (GFM spec, "Autolinks (extension)"): www., http:// or https://, and emails.
GFM_AUTOLINKS = [
    re.compile(r"www\.", re.IGNORECASE),
    re.compile(r"https?://", re.IGNORECASE),
    re.compile(r"[\w.+-]+@[\w-]+(\.[\w-]+)+"),
]


class _Html(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags, self.text = [], []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)

    def handle_data(self, data):
        self.text.append(data)


def rendered(markdown: str) -> tuple[list[str], str]:
    """(tags, text) of `markdown` rendered by a real CommonMark parser with GitHub's tables and strikethrough."""
    parser = _Html()
    parser.feed(MarkdownIt("commonmark").enable(["table", "strikethrough"]).render(markdown))
    return parser.tags, "".join(parser.text)


def table_rows(table) -> dict[str, str]:
    """A field -> value table (ui.record_table) as a reader sees it."""
    return {shown(k): shown(v) for k, v in zip(table.value["field"], table.value["value"])}


def make_trace(tokens, n_layer=2, n_head=3, causal=False, only_weights=False, seed=0) -> AttentionTrace:
    """A trace whose stages come from the same stage function the models use, on random scores."""
    g = torch.Generator().manual_seed(seed)
    T = len(tokens)
    scores = torch.randn(n_layer, n_head, T, T, generator=g) * 4
    mask = torch.ones(n_layer, T, T, dtype=torch.bool)
    if causal:
        mask &= torch.ones(T, T, dtype=torch.bool).tril()
    scale = 0.25
    provenance = Provenance(model="synthetic")
    if only_weights:
        weights = stages_from_scores(scores, scale, mask[:, None]).weights.numpy()
        return AttentionTrace.from_weights(tokens, weights, provenance=provenance)
    return AttentionTrace.from_scores(tokens, scores.numpy(), scale, mask.numpy(), provenance=provenance)


def vector_trace(tokens, n_head=4, n_kv=2, d_head=3, hidden=(3,), dtypes=(torch.float32, torch.bfloat16), seed=0):
    """A trace of recorded layers as the seam keeps them, one per dtype: q [head, query, d], k and values of `n_kv`
    shared heads, a causal mask with the `hidden` keys hidden (kept by its structure), scale 0.25, fill -1e9."""
    g = torch.Generator().manual_seed(seed)
    T = len(tokens)
    mask = torch.ones(T, T, dtype=torch.bool).tril()
    mask[:, list(hidden)] = False
    mask[:, 0] = True  # every query sees a key
    layers = []
    for dtype in dtypes:
        q, k, v = (torch.randn(n, T, d_head, generator=g).to(dtype) for n in (n_head, n_kv, n_kv))
        values = Values(v, torch.rand(n_head, T, generator=g))
        layers.append(LayerRecord(q, k, 0.25, mask, -1e9, values=values))
    return AttentionTrace(tokens, layers, d_head=d_head, provenance=Provenance(model="synthetic"))


def npz_members(data: bytes) -> dict[str, np.ndarray]:
    """Every array of an .npz (the provenance record as a JSON dict), to alter and write back with `npz_of`."""
    with np.load(io.BytesIO(data)) as z:
        out = {k: z[k] for k in z.files}
    out["provenance.json"] = json.loads(str(out["provenance.json"]))
    return out


def npz_of(members: dict) -> bytes:
    """An .npz as np.savez writes it (pickles allowed when writing); a dict or list record is written as JSON."""
    arrays = {
        k: np.array(json.dumps(v)) if k == "provenance.json" and not isinstance(v, np.ndarray) else v
        for k, v in members.items()
    }
    buf = io.BytesIO()
    np.savez_compressed(buf, **arrays)
    return buf.getvalue()


def deflate_bomb(record: dict, inflated: int = 900 * 2**20) -> bytes:
    """A .npz of about 0.9 MB whose weights member inflates ~1000:1 into zeros, after a real provenance record.

    The zeros are deflated once as 1 MiB blocks, each ending in a full flush (no reference to earlier data), so
    the same compressed block can repeat: the file is built in milliseconds instead of compressing 900 MB.
    """
    header = io.BytesIO()
    shape = (1, 1, 1024, inflated // 4 // 1024)
    np.lib.format.write_array_header_1_0(header, {"descr": "<f4", "fortran_order": False, "shape": shape})
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    head = c.compress(header.getvalue()) + c.flush(zlib.Z_FULL_FLUSH)
    block = c.compress(bytes(2**20)) + c.flush(zlib.Z_FULL_FLUSH)
    n = inflated // 2**20
    stream = head + block * n + c.flush(zlib.Z_FINISH)
    crc = zlib.crc32(header.getvalue())
    for _ in range(n):
        crc = zlib.crc32(bytes(2**20), crc)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:  # the record, written the ordinary way
        zf.writestr("provenance.json.npy", _npy(np.array(json.dumps(record))))
    entries = buf.getvalue()[: buf.getvalue().index(b"PK\x01\x02")]  # its local entry; directory rebuilt below
    size = len(header.getvalue()) + n * 2**20
    return _zip_with(entries, zipfile.ZipFile(buf).infolist()[0], b"weights.npy", stream, crc, size)


def _npy(a: np.ndarray) -> bytes:
    out = io.BytesIO()
    np.lib.format.write_array(out, a, allow_pickle=False)
    return out.getvalue()


def _zip_with(first: bytes, first_info: zipfile.ZipInfo, name: bytes, stream: bytes, crc: int, size: int) -> bytes:
    """`first` (one local entry as zipfile wrote it) plus a deflated member written by hand, with their directory."""
    local = struct.pack("<4s5H3L2H", b"PK\x03\x04", 20, 0, 8, 0, 0, crc, len(stream), size, len(name), 0)
    i = first_info
    directory = b"".join(
        struct.pack("<4s6H3L5H2L", b"PK\x01\x02", 20, 20, 0, 8, 0, 0, c, cs, us, len(n), 0, 0, 0, 0, 0, off) + n
        for n, c, cs, us, off in [
            (i.filename.encode(), i.CRC, i.compress_size, i.file_size, 0),
            (name, crc, len(stream), size, len(first)),
        ]
    )
    body = first + local + name + stream
    return body + directory + struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, 2, 2, len(directory), len(body), 0)


#: Markdown an attacker puts in a shared link or a file: an image on a loopback port nothing listens on, a link to a
#: reserved .example host (a request would only be counted, never answered).
HOSTILE_IMAGE, HOSTILE_LINK = "![x](http://127.0.0.1:9/p.png)", "[click](http://evil.example/)"


def hostile_upload(trace: AttentionTrace, text: str, model: str) -> bytes:
    """An exported trace file as one made elsewhere could be: its record's model id is `model` and its notes hold
    a Markdown image."""
    from attnviz import export

    with np.load(io.BytesIO(export.trace_npz(trace, text=text))) as z:
        arrays = {k: z[k] for k in z.files}
    record = json.loads(str(arrays["provenance.json"]))
    record.update(model=model, notes=[f"saved by {HOSTILE_IMAGE}"])
    arrays["provenance.json"] = np.array(json.dumps(record))
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    return buffer.getvalue()


def last_block(loaded) -> torch.nn.Module:
    """The layer (block) of `loaded`'s model that holds its last attention module: what runs after the last attention
    call begins in it."""
    names = {m: n for n, m in loaded.model.named_modules()}
    path = names[loaded.attention_modules[-1]].split(".")
    while not path[-1].isdigit():
        path.pop()
    return loaded.model.get_submodule(".".join(path))
