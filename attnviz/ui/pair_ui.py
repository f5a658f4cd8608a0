"""Where sentence A ends on a page's heatmaps (the sidebar's Second sentence): the dashed lines and their caption."""

from __future__ import annotations

from collections.abc import Callable

import streamlit as st

from ..analysis import pairs
from ..errors import AttnvizError
from ..hf.encode import cut_text
from ..trace import AttentionTrace
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
