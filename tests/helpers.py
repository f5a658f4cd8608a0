"""Shared test helpers: run a page in AppTest and decode the Plotly figures it holds.

AppTest has no Plotly API: a chart is a "plotly_chart" element whose proto.spec is the figure JSON, and
numpy arrays arrive as base64 typed arrays ({"dtype": "f4", "bdata": ..., "shape": "13, 13"}).
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

import numpy as np
import torch
from streamlit.testing.v1 import AppTest

from attnviz.attention import stages_from_scores
from attnviz.trace import AttentionTrace, Provenance

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


def figures(at) -> dict[str, dict]:
    """Every chart on the page as figure JSON, keyed by layout.meta.figure (or its position)."""
    out = {}
    for i, el in enumerate(at.get("plotly_chart")):
        fig = json.loads(el.proto.spec)
        meta = fig.get("layout", {}).get("meta") or {}
        out[meta.get("figure", str(i)) if isinstance(meta, dict) else str(i)] = fig
    return out


def heatmaps(fig: dict) -> list[dict]:
    return [t for t in fig["data"] if t.get("type") == "heatmap"]


def z_arrays(fig: dict) -> list[np.ndarray]:
    """The z matrix of every heatmap trace of a figure, decoded."""
    return [array(t["z"]) for t in heatmaps(fig)]


def run_page(page: str, **state) -> AppTest:
    """A fresh AppTest with `state` put into session state before the first run, then `page` opened.

    Sidebar widgets vanish from AppTest's tree after the first rerun under st.navigation (streamlit 1.67),
    so sidebar settings (text, layer, source, m_*) are set here, through session state, not by widgets.
    """
    at = AppTest.from_file(APP, default_timeout=120)
    for key, value in state.items():
        at.session_state[key] = value
    at.run()
    at.switch_page(page).run()
    return at


def texts(at, kind: str) -> list[str]:
    """The values of every element of one kind (markdown, caption, info, ...) in the main area."""
    return [str(e.value) for e in at.get(kind)]


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
