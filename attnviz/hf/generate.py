"""A decoder writing a continuation, traced: generate with the model's own `generate`, then trace prompt + output once.

A causal decoder's row for a token never changes when later tokens are appended (it cannot see them), so the one
trace holds, row for row, the attention every generation step used (tests/test_generate.py checks this against the
attention transformers returns at each step). The causality is checked on the trace's masks, not assumed.

Sampling draws from the model's full distribution (temperature 1, no top-k or top-p) with a torch.Generator of its
own, seeded by `seed`: reproducible, and independent of other sessions' use of torch's global generator.
"""

from __future__ import annotations

import numpy as np
import torch

from .. import checks
from ..errors import ArgumentError, ArgumentTypeError, InputError, first_line
from ..trace import AttentionTrace
from ..trace.generation import Generation, Segment
from .encode import Encoded, cut_text, encode, token_limit
from .load import LoadedModel
from .probe import model_inputs
from .tracing import trace_encoded

MAX_NEW_TOKENS = 256


def can_generate(loaded: LoadedModel) -> str | None:
    """Why `loaded` cannot write a continuation to trace, as a sentence; None when it can."""
    model = loaded.model
    if loaded.is_seq2seq:
        return (
            f"{loaded.label} is an encoder-decoder model: attnviz.trace(model, source) with no target already "
            "generates its target greedily and traces the encoder, decoder and cross attention. generate() is for "
            "decoder-only models."
        )
    if loaded.route == "weights":
        return (
            f"{loaded.label} gives its final weights only ({loaded.note or 'its own attention code'}): attnviz "
            "cannot check that its attention is causal, which a generation timeline relies on."
        )
    if loaded.lm_head != "causal" or not callable(getattr(model, "generate", None)):
        what = (
            "predicts the token at a mask, not the next one"
            if loaded.lm_head == "masked"
            else f"cannot predict tokens: {loaded.lm_note}"
        )
        return f"{loaded.label} cannot write a continuation: it {what}."
    return None


@checks.public(name="attnviz.generate")
def generate(
    loaded,
    prompt: str,
    max_new_tokens: int = 16,
    *,
    sample: bool = False,
    seed: int | None = None,
    chat: bool = False,
    max_tokens: int | None = None,
) -> AttentionTrace:
    """The trace of `prompt` and up to `max_new_tokens` (1..256) tokens the model writes after it.

    Greedy by default (as model.generate(do_sample=False)); sample=True draws each token from the model's
    distribution, reproducibly for a given `seed` (0 when None). chat=True puts the prompt in the tokenizer's chat
    template as the user's message, with the assistant's turn opened. The prompt is cut to leave room for the new
    tokens within `max_tokens` (the model's positions by default). `trace.generation` says which tokens are
    the prompt, which the model wrote, and the chat template's spans.
    """
    if not isinstance(loaded, LoadedModel):
        raise ArgumentTypeError(
            "loaded",
            f"attnviz.generate needs a model from attnviz.load_model() or attnviz.from_model() as loaded, not "
            f"{type(loaded).__name__}: our own module has no language-model head.",
        )
    checks.text("prompt", prompt)
    sample, chat = checks.flag("sample", sample), checks.flag("chat", chat)
    checks.whole("seed", seed, low=0, high=2**62, none=True)
    checks.whole("max_tokens", max_tokens, low=1, high=checks.MAX_TOKENS, none=True)
    checks.whole("max_new_tokens", max_new_tokens)  # its range below, once the token limit is known
    if (why := can_generate(loaded)) is not None:
        raise InputError(why)
    limit = token_limit(loaded.max_tokens, max_tokens)
    n_new = _checked_new_tokens(max_new_tokens, limit)
    prompt_enc, segments = (
        _chat_prompt(loaded, prompt, limit - n_new)
        if chat
        else (encode(loaded.tokenizer, prompt, None, limit - n_new), ())
    )
    seed = None if not sample else int(seed or 0)
    new_ids, stopped = _generate_ids(loaded, prompt_enc, n_new, seed)
    tok = loaded.tokenizer
    texts = tuple(tok.decode(new_ids[:s]) for s in range(len(new_ids) + 1))
    generation = Generation(len(prompt_enc.ids), tuple(new_ids), texts, segments, sample, seed, stopped)
    enc = _with_output(tok, prompt_enc, new_ids)
    asked = dict(generate=n_new, sample=bool(sample), seed=seed, chat=bool(chat), prompt_tokens=len(prompt_enc.ids))
    trace = trace_encoded(loaded, enc, asked, generation=generation)
    _check_causal(loaded, trace)
    return trace


def _checked_new_tokens(max_new_tokens, limit: int) -> int:
    n = checks.whole("max_new_tokens", max_new_tokens)
    most = min(MAX_NEW_TOKENS, limit - 1)
    if not 1 <= n <= most:
        raise ArgumentError(
            "max_new_tokens",
            f"max_new_tokens must be 1..{most} (at most {MAX_NEW_TOKENS}, and the prompt needs one of the "
            f"{limit} tokens the trace may hold), got {checks.shown(n)}.",
        )
    return n


class _Sampler:
    """A logits processor that draws the next token itself, with its own seeded generator, and leaves only that token
    possible, so model.generate's greedy step picks it (torch.multinomial over the softmax, as generate samples)."""

    def __init__(self, seed: int, device):
        self.generator = torch.Generator(device=device).manual_seed(seed)

    def __call__(self, input_ids, scores):
        chosen = torch.multinomial(torch.softmax(scores, dim=-1), 1, generator=self.generator)
        return torch.full_like(scores, -torch.inf).scatter(-1, chosen, 0.0)


def _generate_ids(loaded: LoadedModel, enc: Encoded, n_new: int, seed: int | None) -> tuple[list[int], str]:
    """(the new token ids, "eos" or "max_new_tokens"): model.generate, greedy or through _Sampler."""
    from transformers import LogitsProcessorList

    model, tok = loaded.model, loaded.tokenizer
    inputs = model_inputs(loaded, enc.inputs)
    eos = model.generation_config.eos_token_id
    eos = tok.eos_token_id if eos is None else eos
    options = dict(
        max_new_tokens=n_new,
        min_new_tokens=0,
        do_sample=False,
        num_beams=1,
        eos_token_id=eos,
        pad_token_id=tok.pad_token_id if tok.pad_token_id is not None else eos,
    )
    if seed is not None:
        options["logits_processor"] = LogitsProcessorList([_Sampler(seed, inputs["input_ids"].device)])
    try:
        with torch.inference_mode():
            out = model.generate(**inputs, **options)
    except Exception as e:  # noqa: BLE001 - only attnviz's own errors may reach a user
        raise InputError(f"{loaded.label} failed while generating ({first_line(e, named=True)}).") from None
    new = [int(i) for i in out[0, inputs["input_ids"].shape[-1] :]]
    ends = {eos} if isinstance(eos, int) else set(eos or ())
    return new, "eos" if new and new[-1] in ends else "max_new_tokens"


def _with_output(tok, prompt: Encoded, new_ids: list[int]) -> Encoded:
    """The prompt's encoding with the generated tokens appended (no word or sequence ids: the tokenizer gave none
    for tokens it did not split)."""
    ids = [*prompt.ids, *new_ids]
    inputs = {"input_ids": torch.tensor([ids]), "attention_mask": torch.ones(1, len(ids), dtype=torch.long)}
    tokens = [str(t) for t in tok.convert_ids_to_tokens(ids)]
    return Encoded(inputs, tokens, ids, prompt.n_dropped, None, list(prompt.notes), prompt.text)


def _chat_prompt(loaded: LoadedModel, prompt: str, limit: int) -> tuple[Encoded, tuple[Segment, ...]]:
    """The prompt as the user's message in the chat template, the assistant's turn opened; the template's spans."""
    tok = loaded.tokenizer
    if not getattr(tok, "chat_template", None):
        raise InputError(f"{loaded.label}'s tokenizer has no chat template: generate with chat=False.")
    if not isinstance(prompt, str) or not prompt.strip():
        raise InputError("The prompt is empty: type a message for the model to answer.")
    prompt, notes = cut_text(prompt, limit)
    found = [s for s in tok.all_special_tokens if s and s in prompt]
    if found:  # the template's text is tokenized with its special tokens live: typed ones would act as control tokens
        raise InputError(
            f"The message contains the special token {found[0]!r}, which the chat template would read as "
            "a control token: remove it, or generate with chat=False."
        )
    user = [{"role": "user", "content": prompt}]
    ids_user, ids = (_template_ids(tok, user, opened) for opened in (False, True))
    if len(ids) > limit:
        raise InputError(
            f"The message is {len(ids)} tokens in the chat template; at most {limit} leave room for the "
            "new tokens: shorten it or ask for fewer new tokens."
        )
    cut = len(ids_user) if ids[: len(ids_user)] == ids_user else 0
    segments = tuple(s for s in (Segment("user", 0, cut), Segment("assistant", cut, len(ids))) if s.stop > s.start)
    if cut == 0:  # the template renders the message differently once the assistant's turn opens: no spans to draw
        segments = ()
    inputs = {"input_ids": torch.tensor([ids]), "attention_mask": torch.ones(1, len(ids), dtype=torch.long)}
    tokens = [str(t) for t in tok.convert_ids_to_tokens(ids)]
    return Encoded(inputs, tokens, ids, 0, None, notes, prompt), segments


def _template_ids(tok, messages: list, opened: bool) -> list[int]:
    try:
        out = tok.apply_chat_template(messages, add_generation_prompt=opened, tokenize=True)
    except Exception as e:  # noqa: BLE001 - a template that fails (it demands a system turn...) is said in words
        raise InputError(f"The chat template failed on this message ({first_line(e, 200, named=True)}).") from None
    ids = out["input_ids"] if hasattr(out, "keys") else out
    return [int(i) for i in (ids[0] if ids and isinstance(ids[0], list) else ids)]


def _check_causal(loaded: LoadedModel, trace: AttentionTrace) -> None:
    """Refuse a model whose masks let a token see later ones: its earlier rows would change as it writes."""
    for layer in range(trace.n_layer):
        mask = trace.layer_mask(layer)
        if mask is None or np.triu(mask, 1).any():
            raise InputError(
                f"{loaded.label}'s attention in layer {layer} is not causal (a token sees later tokens), "
                "so its rows change as it writes: attnviz traces generations of causal decoders only."
            )
