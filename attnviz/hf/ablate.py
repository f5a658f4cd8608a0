"""Ablation: remove some heads' outputs from a forward pass and see what the model predicts without them.

A head's output is its slice of the input of the layer's output projection (the linear that mixes the heads back to
the model width: o_proj, c_proj, out_proj, BERT's output.dense), so a forward pre-hook on that projection removes
it: "zero" sets the slice to 0, "mean" replaces it by its mean over the positions (the head still adds its average,
only its dependence on the position is gone). The hooks are installed for one call and removed in `finally`, and
they act only in the context that installed them (a ContextVar): Streamlit sessions share one cached model, and
another session's forward pass at the same time must see the model unchanged.
"""

from __future__ import annotations

import contextlib
import contextvars
import numbers

import torch

from .. import checks
from ..ablation import MODES, Ablation, top_changes
from ..checks.objects import head_pairs
from ..checks.objects import target as target_token
from ..errors import ArgumentError, ArgumentTypeError, InputError, check_index
from .layers import output_projection
from .load import LoadedModel
from .tracing import trace_pretrained

MAX_HEADS = 256  # heads removed in one call; the page offers at most 16
TOP_K = 50
#: Attributes of an attention module that name its output projection, the first one found wins.
OUTPUT_NAMES = ("o_proj", "c_proj", "out_proj", "o", "dense", "wo", "out")

_ACTIVE: contextvars.ContextVar[object | None] = contextvars.ContextVar("attnviz_ablation", default=None)


@checks.public(name="attnviz.ablate")
def ablate(
    loaded: LoadedModel,
    text: str,
    heads,
    mode: str = "zero",
    target=None,
    *,
    top_k: int = 10,
    max_tokens: int | None = None,
) -> Ablation:
    """Run `text` through `loaded` with `heads` ([(layer, head), ...]) removed and compare with the plain forward.

    mode: "zero" or "mean" (see the module); target: a token (string, one token of the vocabulary) or a token id
    whose logit change is reported (None: the most likely token before). Raises InputError in words for a model
    attnviz cannot intervene in or predict with, and for heads that do not exist.
    """
    check_model(loaded)
    checks.text("text", text)
    if not isinstance(mode, str):
        raise ArgumentTypeError("mode", f"mode must be a str, one of {', '.join(MODES)}; not {type(mode).__name__}.")
    if mode not in MODES:
        raise ArgumentError("mode", f"Unknown ablation mode {checks.shown(mode)}: use one of {', '.join(MODES)}.")
    heads = check_heads(loaded, heads)
    target, top_k = target_token("target", target), checks.whole("top_k", top_k, low=1, high=TOP_K)
    n_vocab = getattr(getattr(loaded.model, "config", None), "vocab_size", None)
    if isinstance(n_vocab, int) and not (target is None or isinstance(target, str) and not target.strip()):
        target_id(loaded, target, torch.zeros(n_vocab))  # a token not in the vocabulary: said before any forward
    checks.whole("max_tokens", max_tokens, low=1, high=checks.MAX_TOKENS, none=True)
    projections = {layer: projection(loaded, layer) for layer in sorted({layer for layer, _ in heads})}
    options = dict(max_tokens=max_tokens)
    logits_before, before = _predict(loaded, text, options, None)
    logits_after, after = _predict(loaded, text, options, (projections, heads, mode, loaded.n_head))
    target = target_id(loaded, target, logits_before)
    k = top_k
    token_of = lambda i: str(loaded.tokenizer.convert_ids_to_tokens(i))  # noqa: E731
    top = top_changes(logits_before.numpy(), logits_after.numpy(), k, token_of)
    return Ablation(
        heads,
        mode,
        before.n_tokens - 1,
        logits_before.numpy(),
        logits_after.numpy(),
        target,
        token_of(target),
        top,
        before,
        after,
    )


def check_model(loaded) -> None:
    """InputError, in words, for a model whose heads attnviz cannot remove or whose prediction it cannot read."""
    if not isinstance(loaded, LoadedModel):
        raise ArgumentTypeError(
            "loaded", f"attnviz.ablate needs a model from attnviz.load_model() as loaded, not {type(loaded).__name__}."
        )
    name = loaded.label
    if loaded.is_seq2seq:
        raise InputError(
            f"{name} is an encoder-decoder model: ablation reads the next token a decoder-only or masked model predicts "
            "from one text, and an encoder-decoder predicts from a source and a target. Use a decoder such as 'gpt2'."
        )
    if not loaded.attention_modules:
        raise InputError(
            f"{name} computes attention inside its own code and gives only its weights, so attnviz "
            "cannot find and remove a head's output in it."
        )
    if not loaded.has_lm_head:
        raise InputError(f"{name} has no prediction that removing a head could change: {loaded.lm_note}")
    if loaded.lm_head != "causal":
        raise InputError(
            f"{name} is a masked language model: it predicts the token at a mask, and the text given to ablate has no "
            "mask attnviz can place. Use a decoder (causal language model) such as 'gpt2'."
        )


def check_heads(loaded: LoadedModel, heads) -> tuple[tuple[int, int], ...]:
    """The heads as sorted unique (layer, head) pairs, each checked against the model."""
    return head_pairs("heads", heads, loaded.n_layer, loaded.n_head, MAX_HEADS)


def projection(loaded: LoadedModel, layer: int) -> torch.nn.Module:
    """The module whose input holds layer `layer`'s heads side by side, its width checked against the heads."""
    mod = loaded.attention_modules[layer]
    proj = next((getattr(mod, a) for a in OUTPUT_NAMES if isinstance(getattr(mod, a, None), torch.nn.Module)), None)
    if proj is None:
        try:
            proj = output_projection(loaded, layer)
        except InputError:
            proj = None
    width = getattr(proj, "in_features", None) or getattr(proj, "nx", None)  # Linear, or GPT-2's Conv1D
    if proj is None or not isinstance(width, int) or width % loaded.n_head:
        raise InputError(
            f"attnviz cannot find where {loaded.label} mixes the heads of layer {layer} back together (its output "
            "projection), so it cannot remove one head's output there."
        )
    return proj


def _predict(loaded: LoadedModel, text: str, options: dict, plan) -> tuple[torch.Tensor, object]:
    """(logits [vocab] at the last token, the trace) of one forward pass, with `plan`'s heads removed if given."""
    got = []

    def grab(module, args, kwargs, out):
        if _ACTIVE.get() is marker:
            got.append(out.logits[0, -1].detach().float().cpu())

    marker = object()
    handles = [loaded.model.register_forward_hook(grab, with_kwargs=True)]
    token = _ACTIVE.set(marker)
    try:
        if plan is not None:
            handles += _remove_heads(marker, *plan)
        trace = trace_pretrained(loaded, text, **options)
    finally:
        _ACTIVE.reset(token)
        for h in handles:
            h.remove()
    return got[-1], trace


def _remove_heads(marker, projections: dict, heads, mode: str, n_head: int) -> list:
    """Forward pre-hooks on the output projections that remove `heads`' slices, active only under `marker`."""
    handles = []
    for layer, proj in projections.items():
        picked = [h for lay, h in heads if lay == layer]

        def hook(module, args, picked=picked):
            if _ACTIVE.get() is not marker:
                return None
            x = args[0]
            split = x.reshape(*x.shape[:-1], n_head, x.shape[-1] // n_head).clone()
            if mode == "zero":
                split[..., picked, :] = 0
            else:  # the mean over positions (axis -3: [batch, position, head, dim])
                split[..., picked, :] = split[..., picked, :].mean(dim=-3, keepdim=True)
            return (split.reshape(x.shape), *args[1:])

        handles.append(proj.register_forward_pre_hook(hook))
    return handles


def target_id(loaded: LoadedModel, target, logits: torch.Tensor) -> int:
    """The target as a token id: None = the most likely token before; an int in the vocabulary; a string that is one
    token of the vocabulary (as the tokenizer writes it, as the pages show it: "·cat" for " cat", or text that encodes
    to one token)."""
    n = int(logits.shape[-1])
    if target is None or (isinstance(target, str) and not target.strip()):
        return int(torch.argmax(logits))
    if isinstance(target, numbers.Integral) and not isinstance(target, bool):
        return check_index("target token id", target, n)
    if not isinstance(target, str) or len(target) > 100:
        raise InputError("The target is a token (at most 100 characters) or a token id.")
    tok = loaded.tokenizer
    ids = [tok.convert_tokens_to_ids(target)]
    if ids[0] is None or ids[0] == tok.unk_token_id and target != tok.unk_token:
        with contextlib.suppress(Exception):
            text = target.replace("·", " ").replace("↵", "\n")  # the pages' readable labels: · a space, ↵ a newline
            ids = list(tok(text, add_special_tokens=False, split_special_tokens=True)["input_ids"])
    if len(ids) != 1 or ids[0] is None or not 0 <= int(ids[0]) < n:
        raise InputError(
            f"The target {target!r} is not one token of {loaded.label}'s vocabulary: choose one of the "
            "tokens listed, or a token id."
        )
    return int(ids[0])
