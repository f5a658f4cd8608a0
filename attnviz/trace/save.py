"""The trace file written: every stage of every layer, what they are made from and a JSON record of what produced
the trace (read back within bounds by attnviz.trace.file, beside it)."""

from __future__ import annotations

import io
import json
import platform
from importlib import metadata

import numpy as np

from .file import NPZ_FORMAT
from .record import AttentionTrace

VERSIONED = ("attnviz", "torch", "transformers", "numpy", "plotly", "streamlit")


def versions() -> dict:
    """Installed versions of the packages a trace depends on (attnviz from the checkout when not installed)."""
    from .. import __version__

    out = {"python": platform.python_version()}
    for name in VERSIONED:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = __version__ if name == "attnviz" else "not installed"
    return out


def provenance_record(trace: AttentionTrace, text: str | None = None, pair: str | None = None) -> dict:
    """Everything needed to reproduce `trace`, JSON-ready: model, revision, attention implementation, dtype,
    device, scale, where it was applied and fill per layer, the options (mask experiments), versions, input text, tokens and ids."""
    p = trace.provenance
    return {
        "format": NPZ_FORMAT,
        "model": p.model,
        "kind": p.kind,
        "revision": p.revision,
        "attn_implementation": p.attn_implementation,
        "dtype": p.dtype,
        "device": p.device,
        "options": [[k, _jsonable(v)] for k, v in p.options],
        "scale": None if trace.scale is None else [float(x) for x in trace.scale],
        "fill": None if trace.fill is None else [float(x) for x in trace.fill],
        "scale_on": None if trace.scale_on is None else list(trace.scale_on),
        "text": text,
        "pair": pair,
        "tokens": list(trace.tokens),
        "key_tokens": list(trace.key_tokens),
        "input_ids": [int(i) for i in p.input_ids],
        "n_dropped": p.n_dropped,
        "d_head": trace.d_head,
        "weights_only": not trace.has("scores"),  # the file format's name for a trace of given weights
        "notes": list(trace.notes),
        "versions": versions(),
    }


def _jsonable(v):
    if isinstance(v, (tuple, list)):
        return [_jsonable(x) for x in v]
    return v.item() if isinstance(v, np.generic) else v


def trace_npz(trace: AttentionTrace, text: str | None = None, pair: str | None = None) -> bytes:
    """The whole trace as .npz: every stage [layer, head, query, key], what they are made from, provenance.json.

    Needs every layer's stages at once: a 512-token, 6 x 12 trace is about 300 MB before compression.
    """
    record = provenance_record(trace, text, pair)
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
