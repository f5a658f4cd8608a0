"""The trace file's bytes: format 2 (each layer's record, attnviz.trace.save) against format 1 (the four dense stages,
as attnviz wrote them before format 2), for the bundled model at 512 tokens, measured in one run.

python -m bench.trace_file            # 512 tokens (about a minute: format 1 compresses ~300 MB)
python -m bench.trace_file --tokens 64
"""

from __future__ import annotations

import argparse
import io
import json
import time

import numpy as np

import attnviz
from attnviz import export
from bench.traces import sentence


def format_1(trace, record: dict) -> bytes:
    """The file as the format-1 writer made it (every stage of every layer, the dense mask, values), for measuring."""
    out = {"provenance.json": np.array(json.dumps({**record, "format": "attnviz-trace/1"}))}
    for name in trace.available_stages:
        out[name] = np.asarray(trace.stage(name), np.float32)
    out["mask"] = trace.mask
    for i in range(trace.n_layer):
        facts = trace.facts(i)
        for part in ("bias", "sinks"):
            if getattr(facts, part) is not None:
                out[f"{part}_{i}"] = getattr(facts, part)
        if facts.softcap is not None:
            out[f"softcap_{i}"] = np.array(facts.softcap, np.float64)
        if trace.has("values"):
            out[f"values_{i}"], out[f"output_norms_{i}"] = trace.value_heads(i), trace.output_norms(i)
    buf = io.BytesIO()
    np.savez_compressed(buf, **out)
    return buf.getvalue()


def run(tokens: int = 512) -> dict:
    model = attnviz.load_model()
    trace = attnviz.trace(model, sentence(tokens), max_tokens=tokens)
    record = export.provenance_record(trace)
    start = time.perf_counter()
    new = export.trace_npz(trace)
    new_s = time.perf_counter() - start
    start = time.perf_counter()
    old = format_1(trace, record)
    old_s = time.perf_counter() - start
    start = time.perf_counter()
    export.load_npz(new)
    open_s = time.perf_counter() - start
    return {
        "tokens": trace.n_tokens,
        "format 1 bytes": len(old),
        "format 2 bytes": len(new),
        "format 2 / format 1": len(new) / len(old),
        "write s (format 1, format 2)": (round(old_s, 2), round(new_s, 2)),
        "reopen s (format 2)": round(open_s, 2),
    }


if __name__ == "__main__":
    p = argparse.ArgumentParser("python -m bench.trace_file", description=__doc__)
    p.add_argument("--tokens", type=int, default=512)
    print(json.dumps(run(p.parse_args().tokens), indent=1))
