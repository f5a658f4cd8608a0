"""Downloads: one layer as CSV or .npz; the whole trace as .npz with its provenance (written by attnviz.trace.save,
beside its reader); a view as one HTML file.

Pure functions returning bytes or text, so pages can hand them to a download button and tests can read them back.

The whole-trace .npz (`trace_npz`, format 2: attnviz.trace.save says what each member holds) keeps what each layer's
stages are made from, as the trace keeps it: q and k (key/value heads not expanded, in their dtype), each row's
log-sum-exp, the mask by its structure, bias, softcap and sinks, the values and what each head writes from each key
(||v W_O||) when the trace keeps them, and a JSON record (`provenance.json`) of what produced it, scale and fill per
layer included. `load_npz` (attnviz.trace.file, which reads any file within bounds) rebuilds the very layer records,
so the reopened trace computes every stage, window, value and neuron view as the original did. Files of format 1
(every stage dense, before format 2) still open, recomputed from their saved scores.
"""

from __future__ import annotations

import functools
import html
import io
import json
import platform
import re
from importlib import metadata

import numpy as np

from . import checks
from .errors import check_index
from .plots.common import print_ready
from .trace import AttentionTrace

# the trace file read back (attnviz.trace.file), as attnviz.export documents it
from .trace.file import NPZ_FORMAT, load_npz, open_npz, read_npz  # noqa: F401
from .trace.save import write_npz

VERSIONED = ("attnviz", "torch", "transformers", "numpy", "plotly", "streamlit")

_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
CSV_MAX_CELLS = 500_000  # about 30 MB of CSV and a few seconds; beyond that offer .npz only


def csv_ok(trace: AttentionTrace) -> bool:
    """Whether one layer as CSV stays a reasonable download (heads x tokens^2 rows)."""
    return trace.n_head * trace.n_tokens * trace.n_keys <= CSV_MAX_CELLS


def _cell(token: str) -> str:
    """Neutralise tokens a spreadsheet would run as a formula ("=HYPERLINK(...)"); a lone "-" is left alone."""
    return "'" + token if len(token) > 1 and token.startswith(_FORMULA_START) else token


def model_slug(trace: AttentionTrace) -> str:
    """The model's name as a file-name part ("module" for our module), safe for every file system."""
    return short_model_name(trace.provenance.short_label)


def short_model_name(label: str) -> str:
    """A model's label as a short file-name part: "all-MiniLM-L6-v2 (bundled)" -> "all-MiniLM-L6-v2", a hub id's
    "/" as "-" ("org/name" -> "org-name"), a local folder by its last component only (never the server's path)."""
    name = str(label).split(" (")[0].strip().rstrip("/\\")
    if name.startswith((".", "/", "~", "\\")) or "\\" in name or name.count("/") > 1 or ":" in name:
        name = re.split(r"[/\\]", name)[-1]  # a folder (absolute, relative, home, Windows): its own name
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", name).strip("-.")[:60] or "model"


def file_name(trace: AttentionTrace, layer: int, ext: str) -> str:
    """attnviz_<model>_layer<k>.<ext>, safe for every file system."""
    return f"attnviz_{model_slug(trace)}_layer{layer}.{ext}"


@checks.public(name="attnviz.export.layer_csv")
def layer_csv(trace: AttentionTrace, layer: int) -> bytes:
    """One row per (head, query, key): positions, tokens and the value of every available stage.

    Built column-wise with pandas (comes with streamlit): a 512-token, 12-head layer is 3 M rows.
    """
    layer = check_index("layer", layer, trace.n_layer)
    import pandas as pd

    shape = (trace.n_head, trace.n_tokens, trace.n_keys)
    h, q, k = (a.ravel() for a in np.meshgrid(*(np.arange(n) for n in shape), indexing="ij"))
    cell = lambda tokens: np.array([_cell(t) for t in tokens], dtype=object)  # noqa: E731
    cols = {
        "layer": np.full(h.size, layer),
        "head": h,
        "query": q,
        "query_token": cell(trace.tokens)[q],
        "key": k,
        "key_token": cell(trace.key_tokens)[k],
    }
    stages = trace.stages(layer)
    for s in trace.available_stages:
        cols[s] = getattr(stages, s).ravel()
    mask = trace.layer_mask(layer)
    if mask is not None:
        cols["may_attend"] = np.broadcast_to(mask, shape).ravel().astype(np.int8)
    return pd.DataFrame(cols).to_csv(index=False, float_format="%.7g", lineterminator="\n").encode("utf-8")


@checks.public(name="attnviz.export.layer_npz")
def layer_npz(trace: AttentionTrace, layer: int) -> bytes:
    """Arrays [head, query, key] for every available stage, plus tokens, scale, fill and mask of the layer."""
    layer = check_index("layer", layer, trace.n_layer)
    out = {"tokens": np.array(trace.tokens, dtype=str), "layer": np.array(layer)}
    stages = trace.stages(layer)
    for s in trace.available_stages:
        out[s] = getattr(stages, s)
    facts = trace.facts(layer)
    if facts.mask is not None:
        out.update(scale=np.array(facts.scale), fill=np.array(facts.fill), mask=facts.mask)
    buf = io.BytesIO()
    np.savez_compressed(buf, **out)
    return buf.getvalue()


# --- the whole trace: .npz with a JSON record ------------------------------------------------------------


def versions() -> dict:
    """Installed versions of the packages a trace depends on (attnviz from the checkout when not installed)."""
    return dict(_versions())


@functools.cache
def _versions() -> tuple:
    """Read once per process (every record asks; reading the packages' metadata took ~7 ms a dashboard run): the
    versions of the modules this process imported, which a later upgrade on disk does not change."""
    from . import __version__

    out = {"python": platform.python_version()}
    for name in VERSIONED:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = __version__ if name == "attnviz" else "not installed"
    return tuple(out.items())


@checks.public(name="attnviz.export.provenance_record")
def provenance_record(trace: AttentionTrace, text: str | None = None, pair: str | None = None) -> dict:
    """Everything needed to reproduce `trace`, JSON-ready: model, revision, attention implementation, dtype,
    device, scale, where it was applied and fill per layer, the options (mask experiments), versions, input text, tokens and ids."""
    checks.text("text", text, none=True), checks.text("pair", pair, none=True)
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


@checks.public(name="attnviz.export.trace_npz")
def trace_npz(trace: AttentionTrace, text: str | None = None, pair: str | None = None) -> bytes:
    """The whole trace as .npz with its provenance record (written by attnviz.trace.save, beside its reader): what
    each layer's stages are made from, not the stages (a 512-token trace of the bundled model: 13 MB, where the four
    dense stages took 271 MB)."""
    return write_npz(trace, provenance_record(trace, text, pair))


def npz_contents(trace: AttentionTrace) -> str:
    """What the trace file of `trace` holds, in Markdown of fixed words and numbers (no user text), for the Export
    page: its arrays and their size before compression against what the four dense stages would take."""
    dims = f"[{trace.n_layer}, {trace.n_head}, {trace.n_tokens}, {trace.n_keys}]"
    dense = len(trace.available_stages) * trace.n_layer * trace.n_head * trace.n_tokens * trace.n_keys * 4 / 1e6
    if not trace.has("scores"):
        return f"The array `weights` [layer, head, query, key] = {dims} (float32, about {dense:,.1f} MB before compression)"
    values = "values `values_<layer>` and ‖v W_O‖ `output_norms_<layer>`, " if trace.has("values") else ""
    return (
        "Per layer what its stages are made from: `q_<layer>` [head, query, d_head] and `k_<layer>` [key/value head, "
        f"key, d_head] as the model used them (or `scores_<layer>`), each row's log-sum-exp `norms_<layer>`, {values}"
        "the mask by its structure, any bias, softcap or sinks; scale and fill in the record. About "
        f"{trace.nbytes / 1e6:,.1f} MB before compression, where the stages {dims} would take {dense:,.1f} MB: "
        "every stage is computed again, exactly, when the file is reopened"
    )


# --- the provenance record as a table ----------------------------------------------------------------------


def record_value(v) -> str:
    """One value of a provenance record as text for a table: strings as they are, the rest as JSON."""
    return v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)


#: The fields a page's provenance panel shows; the Export page shows the whole record.
SUMMARY_FIELDS = ("model", "kind", "revision", "attn_implementation", "dtype", "device", "scale", "fill", "options")


def record_rows(record: dict, full: bool = False) -> dict[str, str]:
    """A provenance record as field -> text for a table: a per-layer list whose layers all agree (scale, fill) is
    said once, options as name = value, one row per package version. `full` keeps every field (text, tokens, ids)."""
    rows = {}
    for name, value in record.items():
        if name == "versions" or not (full or name in SUMMARY_FIELDS):
            continue
        if name in ("scale", "fill") and isinstance(value, list) and value and len(set(value)) == 1:
            value = f"{value[0]:.7g} (every layer)"
        elif name == "options":
            value = ", ".join(f"{k} = {record_value(v)}" for k, v in value) or "none"
        rows[name] = record_value(value)
    return rows | {f"version of {k}": str(v) for k, v in record.get("versions", {}).items()}


def trace_file_name(trace: AttentionTrace, page: str, ext: str, layer: int | None = None) -> str:
    """attnviz_<page>_<model>[_layer<k>].<ext>: names the page, the model and (when one is shown) the layer."""
    page = re.sub(r"[^A-Za-z0-9_.-]+", "-", page).strip("-.") or "view"
    return f"attnviz_{page}_{model_slug(trace)}" + ("" if layer is None else f"_layer{layer}") + f".{ext}"


# --- a view as one HTML file ---------------------------------------------------------------------------------

_HTML = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<style>body{{font-family:sans-serif;background:#fff;color:#111;margin:2em}}
table{{border-collapse:collapse}}td,th{{border:1px solid #ccc;padding:3px 8px;text-align:left;vertical-align:top}}
</style></head><body><h1>{title}</h1>
{figures}
<h2>Provenance</h2><table>{rows}</table>
<p>Made with attnviz. This file works offline: plotly.js and every figure's data are inside it.</p>
</body></html>
"""


def view_html(figures, title: str, provenance: dict) -> str:
    """A self-contained HTML page: the figures (plotly.js and their data inline, no server, no network) on a
    white background, then the provenance record as a table. Tokens and values are escaped."""
    import plotly.io as pio

    parts = [
        pio.to_html(print_ready(fig), include_plotlyjs=(i == 0), full_html=False, include_mathjax=False)
        for i, fig in enumerate(figures)
    ]
    rows = "".join(
        f"<tr><th>{html.escape(str(k))}</th><td>{html.escape(json.dumps(v, ensure_ascii=False))}</td></tr>"
        for k, v in provenance.items()
    )
    return _HTML.format(title=html.escape(title), figures="\n".join(parts), rows=rows)
