"""URL state and the vocabulary of the dashboard's controls: short stable ids in links, labels on screen."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlencode

import streamlit as st

from .. import checks, settings
from ..analysis.masks import COMMON_FILLS
from ..hf import LoadedModel
from ..hf.encode import token_limit
from ..module.tracing import ModuleSource

DEFAULT_TEXT = "The cat sat on the mat because it was tired."


#: The three attentions of an encoder-decoder model.
PARTS = {
    "encoder": "encoder (source → source)",
    "decoder": "decoder (target → target, causal)",
    "cross": "cross (target → source)",
}
SOURCES = {"bundled": "Bundled model", "hub": "Hugging Face model", "module": "Our module"}


URL = "query-params"  # bind widgets to the address bar: a link reproduces the view

MAX_TEXT_CHARS = 20_000  # longer texts are cut (and the page says so); far beyond any model's token limit

#: The longest value of every text field (characters): the widgets' max_chars, which Streamlit enforces on the
#: server for typed and linked values; `bound_text_fields` cuts values that arrive through session state too.
TEXT_LIMITS = {
    "text": MAX_TEXT_CHARS,
    "pair": MAX_TEXT_CHARS,
    "target": MAX_TEXT_CHARS,
    "model": 500,  # hub ids are under 100 characters; a local folder's path may be longer
    "cmp_text": 2_000,
    "cmp_model": 500,
    "abl_target": 100,  # one token
}
FIELD_NAMES = {
    "text": "sentence",
    "pair": "second sentence",
    "target": "target text",
    "model": "model id",
    "cmp_text": "sentence b",
    "cmp_model": "model b",
    "abl_target": "target token",
}

# Streamlit writes a bound widget's new value into the address bar with history.replaceState, so changing
# the layer twice and pressing Back leaves the app. This makes those writes push a history entry instead;
# Back then restores the previous view (Streamlit reruns on popstate with the older address). Only writes
# made by the widget binding (its updateUrlParam method) are turned into entries: Streamlit's own
# replaceState calls while it replays a Back stay replacements, so Forward keeps working. A fixed script
# with no user text in it, run in the app's page itself (st.html with its JavaScript allowed, as widgets.scroll_to).
# Streamlit has no public API for either half (which write is a widget's, whether a rerun replays Back), and a
# popstate listener cannot tell a widget's write from the server's query-parameter writes that follow it, so both
# names are pinned: tests/test_streamlit_history_pin.py fails, saying what to re-check, when an upgrade drops them.
WIDGET_URL_WRITER = "updateUrlParam"  # the method of Streamlit 1.67's frontend bundle that writes a bound widget
HISTORY_RERUN_FLAG = "is_history_navigation"  # ScriptRunContext's field: this rerun replays Back or Forward
HISTORY_JS = """
(() => {
  if (window.__attnvizHistory) return;
  window.__attnvizHistory = true;
  const replace = history.replaceState, push = history.pushState;
  history.replaceState = function (state, unused, url) {
    const moves = url != null && new URL(url, location.href).href !== location.href;
    const fromWidget = moves && (new Error().stack || '').includes('WIDGET_URL_WRITER');
    return (fromWidget ? push : replace).call(history, state, unused, url);
  };
})();
""".replace("WIDGET_URL_WRITER", WIDGET_URL_WRITER)


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


def server_max_tokens() -> int:
    """The server's cap on the token limit (ATTNVIZ_MAX_TOKENS; 512 on a CPU, 256 hosted, 4,096 with a GPU)."""
    return settings.current().max_tokens


def max_tokens() -> int:
    """Longest text the dashboard traces for this session: the sidebar's Token limit, never above the server's cap."""
    cap = server_max_tokens()
    chosen = st.session_state.get("max_tokens")
    return token_limit(cap, chosen if isinstance(chosen, int) else None)


def token_limits(model_tokens: int, device_tokens: int | None = None) -> dict[int, str]:
    """The Token limit's choices: powers of two from 32, and the largest the model, the server and the device allow."""
    top = token_limit(model_tokens, min(server_max_tokens(), device_tokens or model_tokens, checks.MAX_TOKENS))
    stops = [n for n in (2**i for i in range(5, 20)) if n < top] + [top]
    return {n: f"{n:,}" for n in stops}


def fill_value(fill_id: str) -> float:
    """The fill a Masks-page choice stands for."""
    return COMMON_FILLS[FILL_IDS[fill_id]]


#: The URL value of a multi-choice emptied by the user: it matches no option, so a link reads it back as empty.
NONE_CHOSEN = "none"


def url_choice(widget, label: str, options, *, key: str, default=None, multi: bool = False, **kw):
    """A choice widget whose URL value is a short stable id (`source=module`), never its display label.

    `options` is a list of ids or a dict {id: label}. Streamlit's own bind writes the format_func label into
    the URL (`source=Our+module`), so this widget is not bound: the id is read and written here, and links
    that carry an old label are still accepted. An empty address bar in a running session means a page switch
    cleared it (the state is kept and written back); a value nothing matches is dropped (the default is shown).
    """
    labels = options if isinstance(options, dict) else {}
    ids = list(options)
    fmt = lambda o: str(labels.get(o, o))  # noqa: E731
    known = {fmt(o): o for o in ids} | {str(o): o for o in ids}
    default = ([] if multi else ids[0]) if default is None else default
    raw, seen = st.query_params.get_all(key), st.session_state.get(f"url:{key}")
    # The address bar wins on a link or a reload (the first run that meets this control) and on Back / Forward.
    # Otherwise this session wrote it: an address that differs is an older copy (a rerun asked for before our last
    # write arrived), and obeying it would undo the user's last change.
    if (raw and seen is None) or (raw != (seen or []) and history_navigation()):
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
    if multi and not value and default:  # emptied by the user: say so, or the link would reopen the default
        shown = [NONE_CHOSEN]
    # Write only a change: a write sends the server's copy of the whole address, which may predate a widget the
    # browser has just moved (that widget's own write would be undone); an unchanged id needs no write.
    if shown != st.query_params.get_all(key):
        if shown:
            st.query_params[key] = shown
        else:
            del st.query_params[key]
    st.session_state[f"url:{key}"] = shown
    return value


def history_navigation() -> bool:
    """True while Streamlit replays a Back or Forward move: the address bar then holds the view to show."""
    from streamlit.runtime.scriptrunner import get_script_run_ctx

    ctx = get_script_run_ctx()
    return bool(getattr(ctx, HISTORY_RERUN_FLAG, False))


def keep_history() -> None:
    """Make view changes browser history entries, so Back and Forward move between views (see HISTORY_JS)."""
    with st.sidebar:  # st.html runs it in the app's own page (no frame); a fixed script, never user text
        st.html(f"<script>{HISTORY_JS}</script>", unsafe_allow_javascript=True)


def copy_link() -> None:
    """A copy-link control: the page URL already carries the state; this shows it ready to copy."""
    with st.sidebar.popover("Share this view", icon=":material/link:", use_container_width=True):
        st.caption("The address bar holds the whole view (sentence, model, layer, head and page settings).")
        st.code(_current_url(), language=None, wrap_lines=True)


def _current_url() -> str:

    try:
        base = st.context.url or ""
    except Exception:  # noqa: BLE001 - context may be missing in AppTest
        base = ""
    params = {k: st.query_params.get_all(k) for k in st.query_params}
    query = urlencode([(k, v) for k, vs in params.items() for v in vs])
    return f"{base.split('?')[0]}?{query}" if query else base


def bound_text_fields() -> None:
    """Cut every text field to TEXT_LIMITS before a widget or a page reads it, and remember what was cut.

    Run before the sidebar's widgets. A link's value is cut by the widget itself (max_chars) as it is read; a
    value put into session state (by code, or kept from a widget) is cut here. Either way the field is noted, and
    `cut_notes` says so for as long as the field holds the cut value.
    """
    cut = st.session_state.setdefault("_cut_fields", {})
    for key, most in TEXT_LIMITS.items():
        linked = [v for v in st.query_params.get_all(key) if len(v) > most]
        value = st.session_state.get(key)
        if isinstance(value, str) and len(value) > most:
            st.session_state[key] = value = value[:most]
            cut[key] = value
        elif linked:
            cut[key] = linked[-1][:most]


def cut_notes() -> list[str]:
    """One line per text field that holds a value cut to its limit (nothing once the user changes it)."""
    cut = st.session_state.get("_cut_fields", {})
    for key in [k for k, v in cut.items() if st.session_state.get(k) != v]:
        del cut[key]
    return [
        f"The {FIELD_NAMES[k]} is longer than {TEXT_LIMITS[k]:,} characters: only the first {TEXT_LIMITS[k]:,} are used."
        for k in cut
    ]


def text_inputs() -> tuple[str, str | None]:
    """The sentence and the second sentence (None when empty), each at most MAX_TEXT_CHARS characters."""
    text = str(st.session_state.get("text", DEFAULT_TEXT))[:MAX_TEXT_CHARS]
    pair = str(st.session_state.get("pair") or "")[:MAX_TEXT_CHARS].strip() or None
    return text, pair


@dataclass(frozen=True)
class Selection:
    """What the sidebar selected: the loaded base model, our module's settings if that is the source, the layer."""

    model: LoadedModel
    module: tuple | None  # sorted ModuleSource kwargs, or None for the pretrained model itself
    layer: int  # the base model's layer (for our module: where its inputs / copied weights come from)
    part: str | None = None  # encoder-decoder models: which attention, "encoder", "decoder" or "cross"

    @property
    def single_layer(self) -> bool:
        """Our module: one attention layer of its own, with its settings in the sidebar (the layer slider picks
        where its inputs or copied weights come from, not a layer to show)."""
        return self.module is not None

    @property
    def applies_padding(self) -> bool:
        """Whether padding and per-layer experiments apply: the model's own layers take them, our module does not."""
        return self.module is None

    @property
    def trace_layer(self) -> int:
        """The layer to show from a trace of this source (our module's trace has a single layer)."""
        return 0 if self.single_layer else self.layer

    @property
    def layer_label(self) -> str:
        """What the shown layer is called: "layer 3" or "our module"."""
        return "our module" if self.single_layer else f"layer {self.layer}"

    @property
    def where(self) -> str:
        """What the page shows, in words: "layer 3", "our module" (an encoder-decoder: "the cross attention, layer 3")."""
        return f"the {self.part} attention, {self.layer_label}" if self.part else self.layer_label

    @property
    def n_head(self) -> int:
        return int(dict(self.module)["n_head"]) if self.single_layer else self.model.n_head

    @property
    def short_label(self) -> str:
        """The source in a file name: the model's label, or "module" for our module (its description is long)."""
        return "module" if self.single_layer else self.model.label

    @property
    def label(self) -> str:
        return self.module_source().describe() if self.single_layer else self.model.label

    def module_source(self) -> ModuleSource | None:
        return None if self.module is None else ModuleSource(self.model, **dict(self.module))
