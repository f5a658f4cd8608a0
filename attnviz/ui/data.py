"""Cached heavy objects shared by every session (models, traces) and the trace a page asks for."""

from __future__ import annotations

import hashlib
import sys
import time

import streamlit as st
from streamlit import config
from streamlit.runtime import Runtime, RuntimeState

from .. import settings
from ..analysis import heads
from ..cache import BytesLRU
from ..errors import AttnvizError, InputError
from ..hf import BUNDLED, LoadedModel, load_model, trace_pretrained
from ..hf.generate import generate
from ..hf.load import import_in_steps
from ..hf.seq2seq import Seq2SeqTrace, trace_seq2seq
from ..module.tracing import MODULE_OPTIONS, ModuleSource, trace_module
from ..plots import common
from ..trace import AttentionTrace
from ..trace import file as trace_file
from . import first_view, threads
from .generation import generation_request
from .heavy import LIGHT_TOKENS, heavy
from .literal import literal, show_error
from .state import DEFAULT_TEXT, TEXT_LIMITS, Selection, max_tokens, text_inputs


def setup() -> None:
    """Every run: the address the server binds, which turns hosted mode on when it is not a loopback address
    (attnviz.settings)."""
    settings.serving_on(config.get_option("server.address"))
    common.template_by_default()


def warm_up() -> None:
    """At server start (scripts/serve.py): the threads; the default view made ahead, read and built (ui.first_view:
    a cold start's first heatmaps); transformers' modeling code in steps, each after a connected visitor's first run
    has drawn that view (one process: the steps would take the interpreter from it for seconds); the bundled model in
    the shared model cache; and, while no visitor is there yet, one trace and one figure of the default sentence, so
    that the first forward pass and Plotly's first figure (each much slower than the next) are paid before anyone
    waits. A visitor who came while the model loaded runs the same trace and figures at once: doing them here too
    would only compete with that run. Says in the server log how long each step took."""
    from ..plots import heatmaps  # a page's figure module, imported by the first page anyway

    steps, t = {}, time.perf_counter()

    def step(name: str) -> None:
        nonlocal t
        now = time.perf_counter()
        steps[name], t = now - t, now

    threads.for_run(DEFAULT_TEXT, None, None)  # the default view is made ahead below
    common.template_by_default()
    step("setup")
    first_view.prepare()  # the made-ahead trace and its figures, if there is one
    step("first view")
    import_in_steps(lambda: first_view.wait_for_preview(_visitors))  # a visitor's preview first (ui.first_view)
    step("imports")
    model = get_model(BUNDLED)
    step("model")
    if not _visitors():
        trace = trace_pretrained(model, DEFAULT_TEXT, whole_forward=False)
        first_view.keep(BUNDLED, None, DEFAULT_TEXT, {}, trace)
        step("trace")
        heatmaps.head_grid(trace, 0).to_json()
        step("figure")
    print("attnviz: warm-up " + ", ".join(f"{k} {v:.1f} s" for k, v in steps.items()), file=sys.stderr, flush=True)


def _visitors() -> bool:
    """Whether a browser session is connected to this server."""
    return Runtime.exists() and Runtime.instance().state == RuntimeState.ONE_OR_MORE_SESSIONS_CONNECTED


_LOADED: set[str] = set()  # models this process has loaded (the cache may have dropped some since)


def loading_notice(page=None):
    """A main-area placeholder: on a cold start at the default view, the first heatmaps from the trace made ahead
    (ui.first_view); on another cold start it says the model is loading (the sidebar's spinner is easy to miss and
    the main area would stay blank; the tab has started Plotly's script already: app.py). Call `.empty()` on it
    once the page is drawn (a preview stays until the live page replaces it)."""
    box = st.empty()
    if not _LOADED:
        with box.container():
            if page is None or not first_view.preview(page, BUNDLED in _LOADED):
                st.info(
                    "Loading the model and starting up… the first visit after a restart takes a few seconds.",
                    icon=":material/hourglass_top:",
                )
    return box


@st.cache_resource(max_entries=3, show_spinner="Loading the model… (the first load takes a few seconds)")
def get_model(name: str) -> LoadedModel:
    t0 = time.perf_counter()
    loaded = load_model(None if name in ("", BUNDLED) else name)
    # one line per real load in the server log: operators (and the concurrency test) count loads with it
    _LOADED.add(name)
    print(f"attnviz: loaded model {name!r} in {time.perf_counter() - t0:.1f} s", file=sys.stderr, flush=True)
    return loaded


@st.cache_resource
def _trace_cache() -> BytesLRU:
    """One trace cache for all sessions, bounded in bytes (ATTNVIZ_TRACE_CACHE_MB, default 1024)."""
    return BytesLRU(settings.current().trace_cache_bytes, max_entries=64)


def _cached_trace(model_name: str, module_key: tuple | None, text: str, options: tuple) -> AttentionTrace:
    key = (model_name, module_key, text, options)

    def compute() -> AttentionTrace:
        with heavy(_long(text, dict(options))):  # queued behind other long runs; a cached trace never waits
            with threads.for_trace(text, dict(options)):
                return _compute_trace(model_name, module_key, text, options)

    with st.spinner("Running the model and capturing every attention stage…"):
        return _trace_cache().get_or_compute(key, compute)


def _long(text: str, opts: dict) -> bool:
    """Whether a trace may pass LIGHT_TOKENS tokens (queries plus padding and new tokens). Counted from characters,
    before tokenizing: a character gives at most a few byte-level tokens."""
    texts, extra, most = threads.extent(text, opts)
    chars = sum(len(t) for t in texts)
    return min(3 * chars, int(most or 3 * chars)) + extra > LIGHT_TOKENS


def _compute_trace(model_name: str, module_key: tuple | None, text: str, options: tuple) -> AttentionTrace:
    loaded = get_model(model_name)
    opts = dict(options)
    if module_key is not None:
        return trace_module(ModuleSource(loaded, **dict(module_key)), text, **opts)
    if loaded.is_seq2seq:
        return trace_seq2seq(loaded, text, **opts)
    if "generate" in opts:  # the sidebar asked the model to write a continuation (ui.generation)
        return generate(loaded, text, opts.pop("generate"), **opts)
    trace = trace_pretrained(loaded, text, whole_forward=False, **opts)  # the pages read the records alone
    first_view.keep(model_name, module_key, text, opts, trace)  # the default view's, for the next cold start
    return trace


def trace_options(src: Selection, options: dict) -> dict:
    """What a trace of `src` is asked with: the token limit, an encoder-decoder's target text from the sidebar (empty:
    generated greedily) unless the page chose one, and only what our module takes (the page says what it dropped)."""
    options = {"max_tokens": max_tokens(), **options}
    if src.part is not None and "target" not in options:
        options["target"] = str(st.session_state.get("target") or "")[: TEXT_LIMITS["target"]].strip() or None
    if src.module is not None:
        dropped = sorted(k for k in options if k not in MODULE_OPTIONS and options[k] not in (None, True, ()))
        if dropped:
            st.info(f"Our module is a single layer with no padding: {', '.join(dropped)} do not apply to it.")
        options = {k: v for k, v in options.items() if k in MODULE_OPTIONS}
    return options


def get_trace(src: Selection, **options) -> AttentionTrace | None:
    """The trace for the sidebar's sentence and `options` (cached); None after showing a clear message.

    An encoder-decoder gives the part the sidebar chose (encoder, decoder or cross), so every page reads one trace."""
    text, pair = text_inputs()
    threads.for_run(text, pair, max_tokens())  # the run's work on this text: one thread or the configured count
    if not text or not text.strip():
        st.info("Type a sentence in the sidebar to see its attention.")
        return None
    asked = generation_request(src.model) if not src.single_layer and not options and pair is None else {}
    tr = _shown_trace(src, text, trace_options(src, {"pair": pair, **options} if not asked else asked))
    if tr is None:
        return None
    shown = st.session_state.setdefault("_notes_shown", set())
    for note in tr.notes:  # a page may fetch several traces of one text: say each thing once
        if note not in shown:
            shown.add(note)
            st.warning(literal(note))  # notes name the model (a user's id)
    return tr


@st.cache_resource(max_entries=8, show_spinner=False)
def _induction_text(model_name: str) -> str:
    return heads.repeated_random_text(get_model(model_name).tokenizer, n=20, seed=0)


def induction_text(src: Selection) -> str:
    """The repeated random words the induction score is measured on, once per model: drawing them scans the whole
    vocabulary and tokenizes word after word, a good part of a first visit to Head statistics."""
    return _induction_text(src.model.name)


def trace_of_text(src: Selection, text: str, **options) -> AttentionTrace | None:
    """Like get_trace, for a text the page chose (e.g. a repeated random sequence), through the same cache."""
    return _shown_trace(src, text, trace_options(src, options))


def _shown_trace(src: Selection, text: str, options: dict) -> AttentionTrace | None:
    """The cached trace, an encoder-decoder's chosen part of it; None after saying why there is none."""
    try:
        tr = _cached_trace(src.model.name, src.module, text, tuple(sorted(options.items())))
    except InputError as e:
        show_error(e, "warning")
        return None
    except AttnvizError as e:
        show_error(e, "error")
        return None
    return tr.part(src.part or "encoder") if isinstance(tr, Seq2SeqTrace) else tr


def upload_limits() -> trace_file.Limits:
    """What an uploaded trace may declare here: this server's token, layer and head limits and upload budget."""
    conf = settings.current()
    return trace_file.Limits(conf.max_tokens, conf.max_upload_bytes, conf.max_layers, conf.max_heads)


def saved_trace(upload) -> tuple[AttentionTrace, dict] | None:
    """The trace in an uploaded .npz and its record; None (after saying why) for a file that cannot be opened.

    The opened trace is kept in the shared, byte-bounded trace cache under the file's digest, never in session
    state, so held uploads count in the one memory budget with every other trace (a session keeps only the digest,
    and the reason a file was refused). A trace the cache has dropped is opened again from the uploader's bytes.
    The file is checked against this dashboard's limits before anything in it is unpacked (trace_file).
    """
    if upload is None:
        st.session_state.pop("_saved_trace", None)
        return None
    held = st.session_state.get("_saved_trace")
    if held is None or held[0] != upload.file_id:
        data = upload.getvalue()
        held = (upload.file_id, hashlib.sha256(data).hexdigest())
        st.session_state["_saved_trace"] = held
    if held[1].startswith("!"):
        st.error(literal(held[1][1:]))
        return None
    limits = upload_limits()
    try:
        return _trace_cache().get_or_compute(("upload", held[1], limits), lambda: _open_upload(upload, limits))
    except AttnvizError as e:
        st.session_state["_saved_trace"] = (held[0], "!" + str(e))  # said again on every rerun, never reopened
        st.error(literal(e))
        return None


class _Opened(tuple):
    """(trace, record) with the trace's bytes, so the byte-bounded cache counts an upload at its size."""

    @property
    def nbytes(self) -> int:
        return self[0].nbytes


def _open_upload(upload, limits: trace_file.Limits) -> _Opened:
    with heavy():  # unpacking and checking the largest allowed file takes a few hundred MB for a moment
        return _Opened(trace_file.open_npz(upload.getvalue(), limits=limits))
