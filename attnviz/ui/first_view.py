"""A cold start's first heatmaps, drawn from the default view made ahead (attnviz.ui.made_ahead) while transformers and
the model load: the Heads page's grid and one head, exactly the figures the live page draws for the default view,
under a notice that the model is still loading. The sidebar's controls that need the model wait for it as before;
once it is loaded the same run draws the live page below, and the preview goes when that is drawn (app.py).

One process runs the server (the GIL): the warm-up reads the files and builds the figures once (`prepare`) before it
imports transformers, and before each of its import steps it lets a connected visitor's first run draw its preview
first (`wait_for_preview`).
"""

from __future__ import annotations

import threading
import time

import plotly.graph_objects as go
import streamlit as st

from ..hf import BUNDLED
from ..plots.heatmaps import READING
from ..trace import AttentionTrace
from . import made_ahead
from .charts import chart
from .state import DEFAULT_TEXT, SOURCES, server_max_tokens

# the default view's controls: absent from a session's state or at these values (else the visitor asked for another)
DEFAULTS = {"text": DEFAULT_TEXT, "pair": "", "source": next(iter(SOURCES)), "model": ""}
EMBED = {"embed", "embed_options"}  # Streamlit's own query parameters: they change the frame, not the view
WAIT_S = 3.0  # the longest the warm-up waits for a connected visitor's preview
# and then the time it leaves the server to send the preview's figures (~60 kB) and the tab to draw them: with the
# imports going on at once, the figures reached the tab 2.2 s after the run had drawn them (load 7, bench.cold)
SEND_S = 1.5
KEEP_AFTER_S = 3.0  # a default trace is written this long after it was made (a few tens of ms of work)
SHOWN = "_first_view_shown"  # session state: this run drew the preview

_first_run_done = threading.Event()  # a first run decided (drew its preview, or found it could not)
_lock = threading.Lock()
_held: dict = {}
_kept: list[bool] = []
_drawn_at: list[float] = []  # when the first preview was drawn (time.monotonic())
_sent = threading.Event()  # the warm-up has left the server SEND_S to send it


def prepare() -> made_ahead.Made | None:
    """The made-ahead figures, read, checked and built once per process (None: none that fit this machine). The
    warm-up calls this first: a process's first Plotly figure costs it a few tenths of a second (its validators)."""
    where = made_ahead.folder()
    with _lock:
        if where not in _held:  # by folder: settings are read on every call (a test, an operator may change it)
            made = made_ahead.load(DEFAULT_TEXT, where)
            _held[where] = made, None if made is None else {k: go.Figure(v) for k, v in made.figures.items()}
        return _held[where][0]


def _figures() -> dict:
    return _held[made_ahead.folder()][1]


def at_default_view(page) -> bool:
    """Whether this run shows the default page at the default view (no link's settings, nothing changed yet)."""
    if page.url_path != "" or set(st.query_params) - EMBED:
        return False
    return all(st.session_state.get(k, v) in (v, None) for k, v in DEFAULTS.items())


def preview(page, loaded: bool) -> bool:
    """On a cold start (`loaded`: the bundled model is not loaded yet) at the default view, draw the made-ahead
    heatmaps here and say the model is loading; False (nothing drawn) otherwise."""
    st.session_state[SHOWN] = False
    try:
        made = None if loaded or not at_default_view(page) else prepare()
        if made is None or made.n_tokens > server_max_tokens():
            return False
        _draw(made, _figures())
        with _lock:
            _drawn_at[:] = _drawn_at or [time.monotonic()]
        st.session_state[SHOWN] = True
        return True
    finally:
        _first_run_done.set()


def showing_first_view() -> bool:
    """Whether this run drew the made-ahead heatmaps (app.py keeps them until the live page has drawn)."""
    return bool(st.session_state.get(SHOWN))


def _draw(made: made_ahead.Made, figures: dict) -> None:
    st.title("Heads")
    st.info(
        "**The model is still loading** (a few seconds after a restart). Until it is ready, this is the default "
        "sentence's attention from a trace saved on this server; the controls in the sidebar work once it is loaded.",
        icon=":material/hourglass_top:",
    )
    st.subheader(f"Every head of {made.where}")
    st.caption(f"{made.n_head} heads on one colour scale. Hover a cell for its tokens and value.")
    chart(figures["head_grid"], "layer0", "weights", "heads", key="first-view-grid")
    st.subheader("One head up close")
    left, right = st.columns([1, 2.4], gap="large")
    left.markdown(READING)
    with right:
        chart(figures["head_detail"], "layer0", "head0", "weights", key="first-view-head")


def wait_for_preview(connected) -> None:
    """For the warm-up, before each heavy step: while a visitor is connected whose first run has not drawn its preview
    yet, and a made-ahead trace is there to draw, wait for it (at most WAIT_S in all): that run needs the interpreter
    for a few hundred milliseconds, the step for seconds. Once a preview is drawn, leave the server SEND_S to send it."""
    deadline = time.monotonic() + WAIT_S
    while not _first_run_done.is_set() and connected() and prepare() is not None:
        if not _first_run_done.wait(timeout=0.02) and time.monotonic() > deadline:
            return
    if _drawn_at and not _sent.is_set():  # once, after the first preview: it goes out while the warm-up waits
        _sent.set()
        time.sleep(max(0.0, _drawn_at[0] + SEND_S - time.monotonic()))


def keep(model_name: str, module, text: str, options: dict, trace: AttentionTrace) -> None:
    """After a trace: when it is the default view's (the bundled model, the default text, no other options), write it
    for the next cold start unless the folder has a good one (once per process, in the background, a little later)."""
    if _kept or model_name != BUNDLED or module is not None or text != DEFAULT_TEXT:
        return
    if any(v not in (None, ()) for k, v in options.items() if k != "max_tokens"):
        return
    with _lock:
        if _kept:
            return
        _kept.append(True)
    later = threading.Timer(
        KEEP_AFTER_S, made_ahead.keep, args=(trace, text, made_ahead.folder())
    )  # not while the first page draws
    later.daemon = True
    later.start()


def main() -> None:
    """Trace the default view with the bundled model and write it where the settings say (scripts/first_view.py, which
    the image's build runs)."""
    from ..hf import load_model, trace_pretrained

    print(made_ahead.save(trace_pretrained(load_model(), DEFAULT_TEXT, whole_forward=False), DEFAULT_TEXT))
