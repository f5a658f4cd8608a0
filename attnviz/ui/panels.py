"""Small pieces every page shows: where sentence A ends, and what produced the trace (provenance)."""

from __future__ import annotations

import streamlit as st

from .. import export
from ..analysis import pairs
from ..errors import AttnvizError
from ..trace import AttentionTrace
from .state import Selection, text_inputs

#: Provenance fields the panel shows (the Export page's record also holds the text, tokens and ids).
PANEL_FIELDS = ("model", "kind", "revision", "attn_implementation", "dtype", "device", "scale", "fill", "options")


def pair_boundary(src: Selection, trace: AttentionTrace) -> int | None:
    """Where sentence B starts in `trace` (the sidebar's Second sentence), for every heatmap's dashed lines.

    None without a second sentence, for cross-attention, or when it cannot be found (the Sentence pairs page
    says why); the count of sentence A's tokens comes from the model's own tokenizer.
    """
    text, pair = text_inputs()
    if pair is None or pairs.pair_text(trace) is None:
        return None
    try:
        n_first = len(src.model.tokenizer(text)["input_ids"])
        return pairs.pair_boundary(trace, n_first)[0]
    except (AttnvizError, TypeError, KeyError):
        return None


def boundary_caption(boundary: int | None) -> None:
    """One line under the heatmaps saying what the dashed lines are (nothing without a pair)."""
    if boundary is not None:
        st.caption(
            f"Dashed red lines: sentence A ends after token {boundary - 1}, sentence B starts at token {boundary} "
            "(the sidebar's **Second sentence**)."
        )


def provenance(trace: AttentionTrace, expanded: bool = False) -> None:
    """A collapsed panel with what produced the trace on this page: model, revision, attention implementation,
    dtype, device, scale, mask options and package versions (the record the Export page saves)."""
    text, pair = text_inputs()
    record = export.provenance_record(trace, text=text, pair=pair)
    rows = {k: record[k] for k in PANEL_FIELDS}
    if rows["scale"] is not None and len(set(rows["scale"])) == 1:  # one number for every layer: say it once
        rows["scale"] = rows["scale"][0]
    if rows["fill"] is not None and len(set(rows["fill"])) == 1:
        rows["fill"] = rows["fill"][0]
    rows |= {f"version: {k}": v for k, v in record["versions"].items()}
    with st.expander("Provenance: what produced this view", expanded=expanded, icon=":material/info:"):
        st.caption("The same record travels with the Export page's .npz and HTML files (with the tokens and ids).")
        st.table({"field": list(rows), "value": [export.record_value(v) for v in rows.values()]})
