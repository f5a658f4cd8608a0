"""The Corpus page's streamlit pieces: a saved profile kept open while unchanged, and one built with progress."""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from ..corpus import maps, open_profile, profile
from ..errors import AttnvizError
from . import threads
from .literal import show_error


@st.cache_resource(max_entries=4, show_spinner=False)
def opened_profile(folder: str, stamp: float):
    """open_profile, kept while the folder's record is unchanged (`stamp`: its modification time)."""
    return open_profile(folder)


@st.cache_data(max_entries=8, show_spinner=False)
def head_map(_prof, folder: str, stamp: float):
    """The classical-MDS map of a profile's head distances, kept per profile folder and record (a second for 32 x 32
    heads, so not on every rerun)."""
    return maps.classical_mds(_prof.distance)


@st.cache_data(max_entries=256, show_spinner=False)
def example_rows(_loaded, _prof, model: str, folder: str, stamp: float, example: dict):
    """attnviz.corpus.maps.example_rows, kept per (model, profile, example): each one is a trace of its text."""
    return maps.example_rows(_loaded, _prof, example)


def build_profile(model, root: Path) -> str | None:
    """Profile the corpus that ships with attnviz with `model` into a folder of `root` named after it, showing
    progress; the folder's name, or None after showing why it failed."""
    bar = st.progress(0.0, text="Profiling the corpus that ships with attnviz…")

    def step(done, total, tokens, seconds):
        text = f"{done:,} of {total:,} texts, {tokens:,} tokens, {seconds:.0f} s"
        bar.progress(min(done / max(total, 1), 1.0), text=text)

    name = "".join(c if c.isalnum() or c in "-_." else "-" for c in model.label)[:60].strip("-.") or "model"
    part = "encoder" if model.is_seq2seq else None  # an encoder-decoder: its encoder (the command does the others)
    name += "-encoder" if part else ""
    try:
        with threads.for_long_work():  # hundreds of texts: the threads pay here, whatever the sidebar's text
            profile(model, None, out=root / name, progress=step, part=part)
    except AttnvizError as e:
        show_error(e)
        return None
    return name
