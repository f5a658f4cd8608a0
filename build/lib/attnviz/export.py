"""Downloads: one layer of a trace as CSV (for spreadsheets) or .npz (for numpy), every stage it has.

Pure functions returning bytes, so pages can hand them to a download button and tests can read them back.
"""

from __future__ import annotations

import io
import re

import numpy as np

from .errors import check_index
from .trace import AttentionTrace

_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
CSV_MAX_CELLS = 500_000  # about 30 MB of CSV and a few seconds; beyond that offer .npz only


def csv_ok(trace: AttentionTrace) -> bool:
    """Whether one layer as CSV stays a reasonable download (heads x tokens^2 rows)."""
    return trace.n_head * trace.n_tokens**2 <= CSV_MAX_CELLS


def _cell(token: str) -> str:
    """Neutralise tokens a spreadsheet would run as a formula ("=HYPERLINK(...)"); a lone "-" is left alone."""
    return "'" + token if len(token) > 1 and token.startswith(_FORMULA_START) else token


def file_name(trace: AttentionTrace, layer: int, ext: str) -> str:
    """attnviz_<model>_layer<k>.<ext>, safe for every file system."""
    name = "module" if trace.provenance.kind == "module" else trace.model_name.split(" (")[0]
    model = re.sub(r"[^A-Za-z0-9_.-]+", "-", name).strip("-.")[:60]
    return f"attnviz_{model or 'trace'}_layer{layer}.{ext}"


def layer_csv(trace: AttentionTrace, layer: int) -> bytes:
    """One row per (head, query, key): positions, tokens and the value of every available stage.

    Built column-wise with pandas (comes with streamlit): a 512-token, 12-head layer is 3 M rows.
    """
    import pandas as pd

    layer = check_index("layer", layer, trace.n_layer)
    n_head, n = trace.n_head, trace.n_tokens
    h, q, k = (a.ravel() for a in np.meshgrid(np.arange(n_head), np.arange(n), np.arange(n), indexing="ij"))
    toks = np.array([_cell(t) for t in trace.tokens], dtype=object)
    cols = {
        "layer": np.full(h.size, layer),
        "head": h,
        "query": q,
        "query_token": toks[q],
        "key": k,
        "key_token": toks[k],
    }
    for s in trace.stages:
        cols[s] = np.asarray(trace.stage(s, layer), dtype=np.float32).ravel()
    if not trace.weights_only:
        cols["may_attend"] = np.broadcast_to(trace.layer_mask(layer), (n_head, n, n)).ravel().astype(np.int8)
    return pd.DataFrame(cols).to_csv(index=False, float_format="%.7g", lineterminator="\n").encode("utf-8")


def layer_npz(trace: AttentionTrace, layer: int) -> bytes:
    """Arrays [head, query, key] for every available stage, plus tokens, scale, fill and mask of the layer."""
    layer = check_index("layer", layer, trace.n_layer)
    out = {"tokens": np.array(trace.tokens, dtype=str), "layer": np.array(layer)}
    for s in trace.stages:
        out[s] = np.asarray(trace.stage(s, layer), dtype=np.float32)
    if not trace.weights_only:
        record = trace.records[layer]
        out.update(scale=np.array(record.scale), fill=np.array(record.fill), mask=trace.layer_mask(layer))
    buf = io.BytesIO()
    np.savez_compressed(buf, **out)
    return buf.getvalue()
