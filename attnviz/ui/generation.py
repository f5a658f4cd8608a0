"""A generation in the dashboard: the sidebar's request (how many new tokens, the chat template) and the step slider
that walks a generated trace's steps on a page."""

from __future__ import annotations

import streamlit as st

from ..hf import LoadedModel
from ..hf.generate import MAX_NEW_TOKENS, can_generate
from ..plots.common import readable_tokens
from ..plots.windows import Window
from ..trace import AttentionTrace
from .literal import literal
from .state import URL

COLOUR_NAMES = {"prompt": "grey", "generated": "orange", "system": "teal", "user": "blue", "assistant": "green"}


def generation_settings(loaded: LoadedModel) -> None:
    """Sidebar: how many tokens the model writes after the sentence (URL `gen`, 0 = off) and, when its tokenizer has
    a chat template, whether the sentence goes in as the user's message (`gen_chat`). Decoders with a head only."""
    if can_generate(loaded) is not None:
        return
    st.number_input(
        "Generate new tokens (0 = off)",
        0,
        MAX_NEW_TOKENS,
        0,
        key="gen",
        bind=URL,
        help="The model writes this many tokens after the sentence (greedy; it stops early at its end "
        "token); the Heads page then walks through the steps.",
    )
    if getattr(loaded.tokenizer, "chat_template", None):
        st.toggle(
            "Chat template",
            key="gen_chat",
            bind=URL,
            help="The sentence goes in as the user's message, with the assistant's turn opened.",
        )


def generation_request(loaded: LoadedModel) -> dict:
    """What the sidebar asks a trace to generate: {} when generation is off or the model cannot generate."""
    n = st.session_state.get("gen") or 0
    if not isinstance(n, int) or n <= 0 or can_generate(loaded) is not None:
        return {}
    chat = bool(st.session_state.get("gen_chat")) and bool(getattr(loaded.tokenizer, "chat_template", None))
    return {"generate": min(n, MAX_NEW_TOKENS), "chat": chat}


def generation_steps(trace: AttentionTrace, limit: int) -> Window | None:
    """For a generated trace: the step slider (URL `gen_step`), what the model had written by then (as text) and
    the query window of that step, at most `limit` tokens, ending at the step's last row; None for any other trace."""
    gen = trace.generation
    if gen is None:
        return None
    with st.container(key="generation"):
        step = st.slider(
            "Generation step",
            0,
            gen.n_new,
            value=gen.n_new,
            key="gen_step",
            bind=URL,
            help="Step s: the pass that read the prompt and the first s generated tokens. A causal "
            "model's rows never change as it writes, so each step is a window of one trace.",
        )
        start, stop = gen.window(step)
        chose = (
            f" Its last row chose the next token, {literal(repr(readable_tokens(trace.tokens)[stop]))}."
            if step < gen.n_new
            else ""
        )
        how = f"sampled, seed {gen.seed}" if gen.sampled else "greedy"
        ended = " It stopped at its end-of-sequence token." if gen.stopped == "eos" else ""
        st.caption(
            f"Step {step} of {gen.n_new} ({how}): rows 0–{stop - 1}, the {gen.prompt_length}-token prompt and "
            f"{step} generated token{'s' * (step != 1)}.{chose}{ended}"
        )
        st.markdown(f"**Written by step {step}:** {literal(gen.texts[step]) or '(nothing yet)'}")
        roles = dict.fromkeys(s.role for s in gen.spans)
        st.caption(
            "Strips above and right of each map: "
            + ", ".join(f"{COLOUR_NAMES.get(r, 'light grey')} = {literal(r)}" for r in roles)
            + "."
        )
    low = max(0, stop - limit)
    return Window((low, stop), (low, stop))
