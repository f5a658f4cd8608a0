"""Small pieces every page shows: where sentence A ends, and what produced the trace (provenance)."""

from __future__ import annotations

from collections.abc import Callable
from typing import NoReturn

import streamlit as st

from .. import export
from ..analysis import pairs
from ..errors import AttnvizError
from ..hf.encode import cut_text
from ..trace import AttentionTrace
from .literal import record_table
from .state import Selection, max_tokens, text_inputs


def pair_boundary(src: Selection, trace: AttentionTrace) -> int | None:
    """Where sentence B starts in `trace` (the sidebar's Second sentence), for every heatmap's dashed lines.

    None without a second sentence, for cross-attention, or when it cannot be found (the Sentence pairs page
    says why); the count of sentence A's tokens comes from the model's own tokenizer.
    """
    try:
        return find_pair_boundary(src, trace)[0]
    except (AttnvizError, TypeError, KeyError):
        return None


def first_sentence_length(src: Selection, text: str) -> Callable[[], int]:
    """Sentence A's own token count, for `pairs.pair_boundary` to call only when nothing else decides; the text is
    cut as the trace's was before it is tokenized, so a long sentence costs what the trace cost."""
    limit = min(max_tokens(), src.model.max_tokens)
    return lambda: len(src.model.tokenizer(cut_text(text, limit)[0])["input_ids"])


def find_pair_boundary(src: Selection, trace: AttentionTrace) -> tuple[int | None, str]:
    """(where sentence B starts, the rule that found it), or (None, why not); see attnviz.analysis.pairs. Sentence
    A is tokenized alone only for a trace without the tokenizer's sequence ids and separators."""
    text, pair = text_inputs()
    if pair is None or pairs.pair_text(trace) is None:
        return None, "no second sentence"
    return pairs.pair_boundary(trace, first_sentence_length(src, text))


def boundary_caption(boundary: int | None) -> None:
    """One line under the heatmaps saying what the dashed lines are (nothing without a pair)."""
    if boundary is not None:
        st.caption(
            f"Dashed red lines: sentence A ends after token {boundary - 1}, sentence B starts at token {boundary} "
            "(the sidebar's **Second sentence**)."
        )


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
