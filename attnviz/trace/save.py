"""The trace file written: every stage of every layer, what they are made from and the record of what produced the
trace (read back within bounds by attnviz.trace.file, beside it)."""

from __future__ import annotations

import io
import json

import numpy as np

from .record import AttentionTrace


def write_npz(trace: AttentionTrace, record: dict) -> bytes:
    """The whole trace as .npz: every stage [layer, head, query, key], what they are made from, and `record` (what
    produced it: attnviz.export.provenance_record) as provenance.json.

    Needs every layer's stages at once: a 512-token, 6 x 12 trace is about 300 MB before compression.
    """
    out = {"provenance.json": np.array(json.dumps(record, ensure_ascii=False))}
    for name in trace.available_stages:
        out[name] = np.asarray(trace.stage(name), np.float32)
    if trace.mask is not None:
        out["mask"] = trace.mask
    for i in range(trace.n_layer):
        facts = trace.facts(i)
        for part in ("bias", "sinks"):
            if getattr(facts, part) is not None:
                out[f"{part}_{i}"] = getattr(facts, part)
        if facts.softcap is not None:
            out[f"softcap_{i}"] = np.array(facts.softcap, np.float64)
        if trace.has("values"):  # so a reopened file draws value-weighted attention too
            out[f"values_{i}"], out[f"output_norms_{i}"] = trace.value_heads(i), trace.output_norms(i)
    buf = io.BytesIO()
    np.savez_compressed(buf, **out)
    return buf.getvalue()
