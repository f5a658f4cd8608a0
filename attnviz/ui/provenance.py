"""What produced the trace a page shows: the provenance panel every page ends with, and `stop`, which ends a page
early with that panel still shown."""

from __future__ import annotations

from typing import NoReturn

import streamlit as st

from .. import export
from ..trace import AttentionTrace
from .literal import record_table
from .state import text_inputs


def stop(trace: AttentionTrace | None = None) -> NoReturn:
    """End the page here (after the page said why), still with the provenance panel of the trace it read."""
    if trace is not None:
        provenance(trace)
    st.stop()


def provenance(trace: AttentionTrace, full: bool = False) -> None:
    """What produced the trace on this page, in an expander: model, revision, attention implementation, dtype,
    device, scale, mask options and package versions (the record the Export page saves). `full` (the Export
    page): the whole record (text, tokens, ids too) as a table on the page itself."""
    text, pair = text_inputs()
    rows = export.record_rows(export.provenance_record(trace, text=text, pair=pair), full=full)
    if full:
        record_table(rows)
        return
    with st.expander("Provenance: what produced this view", icon=":material/info:"):
        st.caption("The Export page saves this record with the trace (and adds the text, tokens and ids).")
        record_table(rows)
