"""The frame every page shares: sentence, source, model or module settings, layer."""

from __future__ import annotations

import streamlit as st

from .. import settings
from ..attention import SCORE_FUNCTIONS
from ..errors import AttnvizError
from ..hf import BUNDLED, LoadedModel
from ..hf.capacity import device_tokens, trace_bytes_per_token
from ..module.tracing import INPUTS, WEIGHTS, ModuleSource
from ..plots.scores import LABELS as SCORE_LABELS
from .data import get_model
from .generation import generation_settings
from .literal import literal
from .state import (
    DEFAULT_TEXT,
    INPUT_LABELS,
    PARTS,
    SOURCES,
    TEXT_LIMITS,
    URL,
    WEIGHT_LABELS,
    Selection,
    bound_text_fields,
    cut_notes,
    server_max_tokens,
    token_limits,
    url_choice,
)


def sidebar() -> Selection:
    """The frame every page shares: sentence, optional pair, source, model or module settings, layer."""
    bound_text_fields()  # before any widget reads them
    with st.sidebar:
        sentence_fields()
        kind = url_choice(st.radio, "Source", SOURCES, key="source")
        conf = settings.current()
        name = model_field(conf) if kind == "hub" else BUNDLED
        loaded = _load_or_fallback(name)
        part = seq2seq_settings() if loaded.is_seq2seq and kind != "module" else None
        n_layer = loaded.layers_per_role[part] if part else loaded.n_layer
        layer = 0
        if n_layer > 1:
            what = "Layer (inputs / weights taken from)" if kind == "module" else "Layer"
            # no explicit value: the overview's tile click sets this key, and a default value as well would log
            # a warning with a stack trace on every click (the default is min_value, 0, all the same)
            layer = st.slider(what, 0, n_layer - 1, key="layer", bind=URL, help="Layer 0 is nearest the input.")
        module = module_settings(loaded, layer) if kind == "module" else None
        if kind != "module":
            generation_settings(loaded)  # decoders with a language-model head only
        st.caption(f"Running on **{loaded.device}** in **{loaded.dtype}**; stages are computed in float32.")
        chart_format()
        token_limit(loaded)
    for note in cut_notes():  # in the main area, above the page: what the page shows was cut
        st.info(note)
    src = Selection(loaded, module, layer, part)
    st.session_state["_source"] = src
    st.session_state["_notes_shown"] = set()  # notes are shown once per run
    return src


def model_field(conf: settings.Settings) -> str:
    """The model id or local folder a user types (hosted: only the models the operator allows load)."""
    allowed = literal(", ".join(conf.allowed_models)) or "the bundled model"
    name = st.text_input(
        "Model id or local folder",
        value="",
        key="model",
        bind=URL,
        max_chars=TEXT_LIMITS["model"],
        placeholder="bert-base-uncased, gpt2, ./my-model",
        help=f"This hosted dashboard loads only: {allowed}."
        if conf.hosted
        else "Any Hugging Face model id (needs a network) or a folder made with save_pretrained. "
        "Remote code is never run.",
    )
    return name.strip() or BUNDLED


def chart_format() -> None:
    """PNG or SVG: what the camera button above every chart saves."""
    st.radio(
        "Save charts as",
        ["png", "svg"],
        key="img_fmt",
        bind=URL,
        horizontal=True,
        help="What the camera button above each chart saves (white background, dark text).",
    )


def sentence_fields() -> None:
    """The sentence and the optional second sentence; their max_chars cut typed and linked values on the server."""
    st.text_area(
        "Sentence",
        value=DEFAULT_TEXT,
        key="text",
        bind=URL,
        height=90,
        max_chars=TEXT_LIMITS["text"],
        help="Any text. Longer than the model's limit is truncated (the page says so).",
    )
    st.text_input(
        "Second sentence (optional)",
        value="",
        key="pair",
        bind=URL,
        max_chars=TEXT_LIMITS["pair"],
        help="For sentence pairs.",
    )


def token_limit(loaded: LoadedModel) -> int:
    """The longest text traced (URL id `max_tokens`): up to the model's positions, the server's cap and what the
    device's memory holds of a trace of this model (hosted: the trace cache's fixed budget)."""
    cap, conf = server_max_tokens(), settings.current()
    fits, budget = device_tokens(loaded, conf.trace_cache_bytes if conf.hosted else None)
    choices = token_limits(loaded.max_tokens, fits)
    follow_the_model(max(choices))
    with st.container(key="advanced"), st.expander("Advanced"):  # keyed: see widgets.columns
        limit = url_choice(
            st.select_slider,
            "Token limit",
            choices,
            default=max(choices),
            key="max_tokens",
            help="Longer text is cut to this many tokens (the page says so). Long texts trace and draw "
            "more slowly; token-by-token charts show them through a movable window.",
        )
        if loaded.max_tokens > cap:
            st.caption(f"This server allows at most {cap:,} tokens (its operator sets ATTNVIZ_MAX_TOKENS at start).")
        st.caption(
            f"Up to {min(fits, loaded.max_tokens):,} tokens on this device: model positions {loaded.max_tokens:,}, "
            f"memory {budget / 2**20:,.0f} MB for a trace at {trace_bytes_per_token(loaded) / 1024:.1f} KB a token."
        )
    return limit


def follow_the_model(top: int) -> None:
    """A limit nobody chose follows the model: it was the last model's largest (the default, never written into the
    link), so it becomes this one's. A limit a link or the user set stays. Without this, the bundled model's 512
    stuck after switching to a 4,096-position model and the link was rewritten to max_tokens=512."""
    if st.query_params.get_all("max_tokens") and st.session_state.get("url:max_tokens") is None:
        st.session_state["_limit_linked"] = True  # the link's own limit, even the model's largest, stays
    following = st.session_state.get("max_tokens") == st.session_state.get("_limit_top", top)
    if following and not st.session_state.get("_limit_linked"):
        st.session_state["max_tokens"] = top
    st.session_state["_limit_top"] = top


def seq2seq_settings() -> str:
    """For an encoder-decoder model: the decoder's text and which of the three attentions to show."""
    st.text_input(
        "Target text (decoder)",
        value="",
        key="target",
        bind=URL,
        placeholder="empty: the model writes one",
        max_chars=TEXT_LIMITS["target"],
        help="What the decoder reads, fed as in training (shifted right by one). Empty: generated greedily.",
    )
    return url_choice(st.radio, "Attention", PARTS, key="part")


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
        st.error(f"{literal(e)}\n\nShowing {literal(shown)} instead.")  # e quotes the id a link carried
        return get_model(fallback)


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
    score = url_choice(
        st.selectbox,
        "Score function",
        {s: SCORE_LABELS[s] for s in SCORE_FUNCTIONS},
        default="scaled_dot",
        key="m_score",
        help="How a query and a key become one score (the Score functions page compares all four).",
    )
    cross, valid = cross_settings()
    cfg = dict(
        d_model=int(d_model),
        n_head=int(n_head),
        bias=bool(bias),
        seed=int(seed),
        inputs=inputs,
        weights=weights,
        layer=layer,
        cross=bool(cross),
        valid_keys=int(valid) or None,
        score=score,
    )
    return tuple(sorted(cfg.items()))


def module_preview(src: Selection) -> Selection:
    """Our module as the Our module page shows it while the sidebar's source is a pretrained model (`src` itself
    when the source is our module already).

    It mirrors the sidebar's layer (weights copied, run on the vectors entering the layer), so the page
    opens on something meaningful: the module reproducing the library. Families whose layers cannot be
    copied get seeded random weights on random inputs instead.
    """
    if src.single_layer:
        return src
    m = src.model
    cfg = dict(
        d_model=m.d_model, n_head=m.n_head, bias=True, seed=0, layer=src.layer, inputs="hidden", weights="pretrained"
    )
    try:
        ModuleSource(m, **cfg).build()
    except AttnvizError:
        cfg.update(inputs="random", weights="random")
    return Selection(m, tuple(sorted(cfg.items())), src.layer)


def score_sources(src: Selection) -> dict[str, Selection]:
    """Our module once per score function (SCORE_FUNCTIONS), everything else as the sidebar sets it (or, with a
    pretrained source, as the Our module page's preview: the layer's weights on the vectors entering it)."""
    base = module_preview(src)
    cfg = dict(base.module)
    return {s: Selection(base.model, tuple(sorted({**cfg, "score": s}.items())), base.layer) for s in SCORE_FUNCTIONS}


def cross_settings() -> tuple[bool, int]:
    """Our module's cross-attention switch and how many of its keys are real (the rest padding; 0: all)."""
    cross = st.toggle(
        "Cross-attention",
        key="m_cross",
        bind=URL,
        help="Queries from the sentence; keys and values from the second sentence (without one: 6 seeded vectors).",
    )
    if not cross:
        return False, 0
    valid = st.number_input(
        "Valid keys (0 = all)",
        0,
        4096,
        0,
        key="m_valid",
        bind=URL,
        help="Keys after the first N are padding: no query may attend them.",
    )
    return True, valid
