"""The dashboard frame: shared sidebar, URL state, cached models and traces.

The only attnviz module that imports streamlit. Pages call `ui.current()`, `ui.get_trace(...)` and
the widgets here; they never load models or compute anything themselves.

State lives in widget keys bound to the URL (`bind="query-params"`), so a link reproduces the view
and survives page switches and reloads. Streamlit ignores and removes a query value a widget cannot
take (layer=99, a head of -1, garbage), so bad links fall back to defaults instead of failing.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass

import streamlit as st
import torch

from . import settings
from .analysis.masks import COMMON_FILLS
from .cache import BytesLRU
from .errors import AttnvizError, InputError
from .hf import BUNDLED, LoadedModel, load_model, trace_pretrained
from .plots.common import chart_config
from .scratch import INPUTS, MODULE_OPTIONS, WEIGHTS, ModuleSource, trace_module
from .trace import AttentionTrace

DEFAULT_TEXT = "The cat sat on the mat because it was tired."
SOURCES = {"bundled": "Bundled model", "hub": "Hugging Face model", "module": "Our module"}
URL = "query-params"  # bind widgets to the address bar: a link reproduces the view
#: Fill choices on the Masks page: URL id -> name in analysis.masks.COMMON_FILLS.
FILL_IDS = {"min": "float32 min", "-10000": "-10000", "-1e9": "-1e9", "-inf": "-inf"}
INPUT_LABELS = {
    "embeddings": "model embeddings",
    "hidden": "hidden states entering the layer",
    "random": "random (seeded)",
}
WEIGHT_LABELS = {"random": "random (seeded)", "pretrained": "copied from the layer"}
FILL_LABELS = {"min": "float32 min (the model's own)", "-10000": "-10000", "-1e9": "-1e9", "-inf": "-inf"}

#: What each stage is, in the words the pages use next to the figures.
STAGE_HELP = {
    "scores": "**scores**: the raw dot product of each query vector with each key vector (q·k). "
    "Large positive means 'these two tokens match'; the numbers can be any size and sign.",
    "scaled": "**scaled**: the scores multiplied by the scale the model used (1/√d_head for BERT), so "
    "their size no longer grows with the vector length and the softmax does not saturate.",
    "masked": "**masked**: the scaled scores with forbidden pairs removed (padding, future tokens in a causal "
    "model). Removed cells are drawn as gaps; the model puts a huge negative number there.",
    "weights": "**weights**: the softmax of each row of the masked scores: how much each query takes from "
    "each key. Every row sums to 1; masked cells get 0.",
}


def max_tokens() -> int:
    """Longest text the dashboard traces (ATTNVIZ_MAX_TOKENS; 512, or 256 when hosted)."""
    return settings.current().max_tokens


def fill_value(fill_id: str) -> float:
    """The fill a Masks-page choice stands for."""
    return COMMON_FILLS[FILL_IDS[fill_id]]


def setup() -> None:
    """Once per process: torch threads. Safe to call on every run."""
    if not getattr(setup, "done", False):
        torch.set_num_threads(max(1, min(4, os.cpu_count() or 1)))
        setup.done = True


# --- cached heavy objects (shared by every session; both are immutable once built) ------------------


@st.cache_resource(max_entries=3, show_spinner="Loading the model… (the first load takes a few seconds)")
def get_model(name: str) -> LoadedModel:
    t0 = time.perf_counter()
    loaded = load_model(None if name in ("", BUNDLED) else name)
    # one line per real load in the server log: operators (and the concurrency test) count loads with it
    print(f"attnviz: loaded model {name!r} in {time.perf_counter() - t0:.1f} s", file=sys.stderr, flush=True)
    return loaded


@st.cache_resource
def _trace_cache() -> BytesLRU:
    """One trace cache for all sessions, bounded in bytes (ATTNVIZ_TRACE_CACHE_MB, default 1024)."""
    return BytesLRU(settings.current().trace_cache_bytes, max_entries=64)


def _cached_trace(model_name: str, module_key: tuple | None, text: str, options: tuple) -> AttentionTrace:
    key = (model_name, module_key, text, options)
    with st.spinner("Running the model and capturing every attention stage…"):
        return _trace_cache().get_or_compute(key, lambda: _compute_trace(model_name, module_key, text, options))


def _compute_trace(model_name: str, module_key: tuple | None, text: str, options: tuple) -> AttentionTrace:
    loaded = get_model(model_name)
    opts = dict(options)
    if module_key is not None:
        return trace_module(ModuleSource(loaded, **dict(module_key)), text, **opts)
    return trace_pretrained(loaded, text, **opts)


# --- the shared sidebar -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Selection:
    """What the sidebar selected: the loaded base model, our module's settings if that is the source, the layer."""

    model: LoadedModel
    module: tuple | None  # sorted ModuleSource kwargs, or None for the pretrained model itself
    layer: int  # the base model's layer (for our module: where its inputs / copied weights come from)

    @property
    def is_module(self) -> bool:
        return self.module is not None

    @property
    def trace_layer(self) -> int:
        """The layer to show from a trace of this source (our module's trace has a single layer)."""
        return 0 if self.is_module else self.layer

    @property
    def n_head(self) -> int:
        return int(dict(self.module)["n_head"]) if self.is_module else self.model.n_head

    @property
    def label(self) -> str:
        return self.module_source().describe() if self.is_module else self.model.label

    def module_source(self) -> ModuleSource | None:
        return None if self.module is None else ModuleSource(self.model, **dict(self.module))


def sidebar() -> Selection:
    """The frame every page shares: sentence, optional pair, source, model or module settings, layer."""
    with st.sidebar:
        st.text_area(
            "Sentence",
            value=DEFAULT_TEXT,
            key="text",
            bind=URL,
            height=90,
            max_chars=20000,
            help="Any text. Longer than the model's limit is truncated (the page says so).",
        )
        st.text_input("Second sentence (optional)", value="", key="pair", bind=URL, help="For sentence pairs.")
        kind = url_choice(st.radio, "Source", SOURCES, key="source")
        conf = settings.current()
        name = BUNDLED
        if kind == "hub":
            name = (
                st.text_input(
                    "Model id or local folder",
                    value="",
                    key="model",
                    bind=URL,
                    placeholder="bert-base-uncased, gpt2, ./my-model",
                    help=(
                        f"This hosted dashboard loads only: {', '.join(conf.allowed_models) or 'the bundled model'}."
                        if conf.hosted
                        else "Any Hugging Face model id (needs a network) or a folder made with save_pretrained. "
                        "Remote code is never run."
                    ),
                ).strip()
                or BUNDLED
            )
        loaded = _load_or_fallback(name)
        layer = 0
        if loaded.n_layer > 1:
            what = "Layer (inputs / weights taken from)" if kind == "module" else "Layer"
            # no explicit value: the overview's tile click sets this key, and a default value as well would log
            # a warning with a stack trace on every click (the default is min_value, 0, all the same)
            layer = st.slider(what, 0, loaded.n_layer - 1, key="layer", bind=URL, help="Layer 0 is nearest the input.")
        module = module_settings(loaded, layer) if kind == "module" else None
    src = Selection(loaded, module, layer)
    st.session_state["_source"] = src
    st.session_state["_notes_shown"] = set()  # notes are shown once per run
    return src


def url_choice(widget, label: str, options, *, key: str, default=None, multi: bool = False, **kw):
    """A choice widget whose URL value is a short stable id (`source=module`), never its display label.

    `options` is a list of ids or a dict {id: label}. Streamlit's own bind writes the format_func label into
    the URL (`source=Our+module`), so this widget is not bound: the id is read and written here, and links
    that carry an old label are still accepted. An empty address bar in a running session means a page switch
    cleared it (the state is kept and written back); a value nothing matches is dropped.
    """
    labels = options if isinstance(options, dict) else {}
    ids = list(options)
    fmt = lambda o: str(labels.get(o, o))  # noqa: E731
    known = {fmt(o): o for o in ids} | {str(o): o for o in ids}
    default = ([] if multi else ids[0]) if default is None else default
    raw, seen = st.query_params.get_all(key), st.session_state.get(f"url:{key}")
    if raw and raw != seen:  # a link or a reload: the address bar wins
        found = [known[r] for r in raw if r in known]
        st.session_state[key] = found if multi else (found[0] if found else default)
    state = st.session_state.get(key, default)
    if multi:
        state = [v for v in state if v in ids] if isinstance(state, (list, tuple)) else []
    elif state not in ids:
        state = default
    st.session_state[key] = state
    value = widget(label, ids, key=key, format_func=fmt, **kw)
    shown = [str(v) for v in (value if multi else [value])] if value != default else []
    if shown:
        st.query_params[key] = shown
    elif key in st.query_params:
        del st.query_params[key]
    st.session_state[f"url:{key}"] = shown
    return value


def current() -> Selection:
    """The Selection the frame built for this run (pages call this)."""
    src = st.session_state.get("_source")
    return src if src is not None else sidebar()


def _load_or_fallback(name: str) -> LoadedModel:
    """Load `name`; if that fails, say why and stay on the last model that worked (else the bundled one)."""
    try:
        loaded = get_model(name)
        st.session_state["_last_good_model"] = name
        return loaded
    except AttnvizError as e:
        fallback = st.session_state.get("_last_good_model", BUNDLED)
        fallback = BUNDLED if fallback == name else fallback
        shown = "the bundled model" if fallback == BUNDLED else fallback
        st.error(f"{e}\n\nShowing {shown} instead.")
        return get_model(fallback)


def head_picker(src: Selection, container=None, disabled: bool = False) -> int:
    """The head slider; bound to the URL so links open on the same head.

    `disabled` greys it out (e.g. while a page pools all heads) without dropping the chosen head from the URL.
    """
    return (container or st).slider("Head", 0, src.n_head - 1, key="head", bind=URL, disabled=disabled)


def scroll_to(anchor: str) -> None:
    """Bring the heading with this anchor into view (after a click that opened something further up the page)."""
    import json

    from streamlit.components.v1 import html

    target = json.dumps(f"#{anchor}")
    html(f"<script>window.parent.document.querySelector({target})?.scrollIntoView({{block: 'start'}});</script>", 0)


def module_preview(src: Selection) -> Selection:
    """Our module as the Our module page shows it while the sidebar's source is a pretrained model.

    It mirrors the sidebar's layer (weights copied, run on the vectors entering the layer), so the page
    opens on something meaningful: the module reproducing the library. Families whose layers cannot be
    copied get seeded random weights on random inputs instead.
    """
    m = src.model
    cfg = dict(
        d_model=m.d_model, n_head=m.n_head, bias=True, seed=0, layer=src.layer, inputs="hidden", weights="pretrained"
    )
    try:
        ModuleSource(m, **cfg).build()
    except AttnvizError:
        cfg.update(inputs="random", weights="random")
    return Selection(m, tuple(sorted(cfg.items())), src.layer)


def stage_picker(trace: AttentionTrace) -> str:
    """The stage selector shared by the Heads and Our module pages (one URL key, "stage")."""
    if trace.weights_only:
        st.caption(
            "Stage: **weights**, the only stage this model exposes (its scores are computed inside its own code)."
        )
        return "weights"
    stage = st.segmented_control(
        "Stage",
        trace.stages,
        default="weights",
        required=True,
        key="stage",
        bind=URL,
        help="scores = q·k → scaled (× scale) → masked (forbidden pairs removed) → weights (softmax).",
    )
    return stage or "weights"


def token_window(trace: AttentionTrace, limit: int) -> tuple[int, int] | None:
    """For texts longer than `limit` tokens, a range slider choosing which tokens the heatmaps show."""
    if trace.n_tokens <= limit:
        return None
    return st.slider(
        f"Tokens shown (at most {limit} at a time, queries and keys alike)",
        0,
        trace.n_tokens,
        (0, limit),
        key="tokens",
        help="Long texts are shown through a window so the page stays fast; the overview below covers every token.",
    )


# --- our module's settings (sidebar, shown when the source is our module) ---------------------------


def module_settings(loaded: LoadedModel, layer: int) -> tuple:
    """Widgets for our MultiHeadAttention; returns its settings as a hashable tuple of ModuleSource kwargs."""
    st.caption("Our module: `attnviz.MultiHeadAttention`, written from scratch.")
    inputs = url_choice(st.selectbox, "Input vectors", {i: INPUT_LABELS.get(i, i) for i in INPUTS}, key="m_inputs")
    weights = url_choice(st.selectbox, "Weights", {w: WEIGHT_LABELS.get(w, w) for w in WEIGHTS}, key="m_weights")
    fixed_width = inputs != "random" or weights == "pretrained"
    d_model = loaded.d_model
    if not fixed_width:
        d_model = st.number_input("d_model", 4, 1024, loaded.d_model, step=4, key="m_dmodel", bind=URL)
    else:
        st.caption(f"d_model = {loaded.d_model} (fixed by the model's vectors or weights)")
    choices = [h for h in range(1, min(d_model, 32) + 1) if d_model % h == 0]
    n_head = loaded.n_head
    if weights != "pretrained":
        default = loaded.n_head if loaded.n_head in choices else choices[-1]
        n_head = st.select_slider(
            "Heads", choices, value=default, key="m_heads", bind=URL, help="Only divisors of d_model."
        )
        bias = st.toggle("Bias", value=True, key="m_bias", bind=URL)
        seed = st.number_input("Seed", 0, 2**31 - 1, 0, key="m_seed", bind=URL)
    else:
        bias, seed = True, 0
    cfg = dict(
        d_model=int(d_model),
        n_head=int(n_head),
        bias=bool(bias),
        seed=int(seed),
        inputs=inputs,
        weights=weights,
        layer=layer,
    )
    return tuple(sorted(cfg.items()))


# --- traces -----------------------------------------------------------------------------------------


def text_inputs() -> tuple[str, str | None]:
    text = st.session_state.get("text", DEFAULT_TEXT)
    pair = (st.session_state.get("pair") or "").strip() or None
    return text, pair


def get_trace(src: Selection, **options) -> AttentionTrace | None:
    """The trace for the sidebar's sentence and `options` (cached); None after showing a clear message."""
    text, pair = text_inputs()
    if not text or not text.strip():
        st.info("Type a sentence in the sidebar to see its attention.")
        return None
    options = {"pair": pair, "max_tokens": max_tokens(), **options}
    if src.is_module:
        dropped = sorted(k for k in options if k not in MODULE_OPTIONS and options[k] not in (None, True, ()))
        if dropped:
            st.info(f"Our module is a single layer with no padding: {', '.join(dropped)} do not apply to it.")
        options = {k: v for k, v in options.items() if k in MODULE_OPTIONS}
    try:
        tr = _cached_trace(src.model.name, src.module, text, tuple(sorted(options.items())))
    except InputError as e:
        st.warning(str(e))
        return None
    except AttnvizError as e:
        st.error(str(e))
        return None
    shown = st.session_state.setdefault("_notes_shown", set())
    for note in tr.notes:  # a page may fetch several traces of one text: say each thing once
        if note not in shown:
            shown.add(note)
            st.warning(note)
    return tr


def section(fig, title: str, why: str, key: str, *name_parts) -> None:
    """A heading, what the figure shows and why, then the figure at full width."""
    st.subheader(title, divider="gray")
    st.markdown(why)
    st.plotly_chart(fig, key=key, theme=None, config=chart_config(*name_parts, key))


def copy_link() -> None:
    """A copy-link control: the page URL already carries the state; this shows it ready to copy."""
    with st.sidebar.popover("Share this view", icon=":material/link:", use_container_width=True):
        st.caption("The address bar holds the whole view (sentence, model, layer, head and page settings).")
        st.code(_current_url(), language=None, wrap_lines=True)


def _current_url() -> str:
    from urllib.parse import urlencode

    try:
        base = st.context.url or ""
    except Exception:  # noqa: BLE001 - context may be missing in AppTest
        base = ""
    params = {k: st.query_params.get_all(k) for k in st.query_params}
    query = urlencode([(k, v) for k, vs in params.items() for v in vs])
    return f"{base.split('?')[0]}?{query}" if query else base


def selected_tile(event) -> tuple[int, int] | None:
    """(layer, head) from a Streamlit plotly selection event on the overview, or None if nothing usable.

    Expects {"selection": {"points": [{"customdata": [layer, head], ...}], ...}} (dicts or Streamlit's
    attribute dicts); takes the first point that carries a [layer, head] pair. Customdata sent as a numpy
    typed array comes back from the browser as {"0": layer, "1": head}, so that form is accepted too.
    """
    try:
        points = event["selection"]["points"]
    except (KeyError, TypeError, IndexError):
        return None
    for point in points or ():
        data = point.get("customdata") if hasattr(point, "get") else None
        if hasattr(data, "get"):
            data = [data.get("0"), data.get("1")]
        if isinstance(data, (list, tuple)) and len(data) >= 2:
            try:
                return int(data[0]), int(data[1])
            except (TypeError, ValueError):
                continue
    return None


def trace_of_text(src: Selection, text: str, **options) -> AttentionTrace | None:
    """Like get_trace, for a text the page chose (e.g. a repeated random sequence), through the same cache."""
    options = {"max_tokens": max_tokens(), **options}
    try:
        return _cached_trace(src.model.name, src.module, text, tuple(sorted(options.items())))
    except AttnvizError as e:
        st.warning(str(e))
        return None
