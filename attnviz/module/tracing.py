"""Tracing our own MultiHeadAttention on a sentence, so it can be shown exactly like a pretrained layer."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from .. import checks
from ..attention import DEFAULT_FILL, SCORE_FUNCTIONS, check_scale
from ..errors import ArgumentTypeError, InputError, kind_of
from ..hf import LoadedModel, attention_inputs
from ..hf.encode import encode, token_limit
from ..trace import AttentionTrace, Provenance
from .from_layer import module_from_layer
from .multihead import MultiHeadAttention, seeded_module, seeded_vectors

INPUTS = ("embeddings", "hidden", "random")
WEIGHTS = ("random", "pretrained")
MODULE_OPTIONS = ("pair", "causal", "hide", "scale", "fill", "max_tokens")  # what trace_module accepts


@dataclass(frozen=True)
class ModuleSource:
    """Our module plus where its input vectors and weights come from.

    inputs:  "embeddings" (what enters the base model's layer 0), "hidden" (what enters `layer`),
             or "random" (seeded N(0, 1) vectors, one per token).
    weights: "random" (seeded, the same in every process) or "pretrained" (copied from `layer`).
    cross:   False: self-attention over the sentence. True: cross-attention, queries from the sentence and keys
             and values from the second sentence (or, without one, `n_keys` seeded vectors).
    valid_keys: with cross, only the first valid_keys keys are visible (the rest are padding), as valid lengths do.
    score:   the score function (attention.SCORE_FUNCTIONS), its parameters seeded by `seed`.
    Tokens always come from the base model's tokenizer.
    """

    base: LoadedModel
    d_model: int | None = None  # None: the base model's hidden size
    n_head: int | None = None  # None: the base model's head count
    bias: bool = True
    seed: int = 0
    inputs: str = "embeddings"
    weights: str = "random"
    layer: int = 0
    cross: bool = False
    n_keys: int = 6
    valid_keys: int | None = None
    score: str = "scaled_dot"

    def __post_init__(self):
        """Each field checked as it is given (types and ranges); `build` checks how they combine."""
        if not isinstance(self.base, LoadedModel):
            raise ArgumentTypeError(
                "base", f"base must be a model from attnviz.load_model(), not {kind_of(self.base)}."
            )
        checks.whole("d_model", self.d_model, low=1, high=checks.MAX_WIDTH, none=True)
        checks.whole("n_head", self.n_head, low=1, high=checks.MAX_HEADS, none=True)
        checks.whole("n_keys", self.n_keys, low=1, high=checks.MAX_TOKENS)
        checks.whole("valid_keys", self.valid_keys, low=0, high=checks.MAX_TOKENS, none=True)
        checks.whole("seed", self.seed, low=0, high=2**62)
        checks.check_index("layer", self.layer, self.base.n_layer)
        for name in ("bias", "cross"):
            checks.flag(name, getattr(self, name))
        for name, options in (("inputs", INPUTS), ("weights", WEIGHTS), ("score", SCORE_FUNCTIONS)):
            checks.choice(name, getattr(self, name), options)

    def resolved(self) -> tuple[int, int]:
        d_model = self.base.d_model if self.d_model is None else int(self.d_model)
        n_head = self.base.n_head if self.n_head is None else int(self.n_head)
        return d_model, n_head

    def build(self) -> MultiHeadAttention:
        """The module this source describes (validated: clear errors for impossible combinations)."""
        if self.inputs not in INPUTS:
            raise InputError(f"inputs must be one of {INPUTS}, got {self.inputs!r}")
        if self.weights not in WEIGHTS:
            raise InputError(f"weights must be one of {WEIGHTS}, got {self.weights!r}")
        if self.score not in SCORE_FUNCTIONS:
            raise InputError(f"score must be one of {SCORE_FUNCTIONS}, got {self.score!r}")
        d_model, n_head = self.resolved()
        if self.inputs != "random" and d_model != self.base.d_model:
            raise InputError(
                f"Vectors from {self.base.label} have {self.base.d_model} dimensions, so d_model must be "
                f"{self.base.d_model} (or choose random inputs)."
            )
        if self.weights == "pretrained":
            if (d_model, n_head) != (self.base.d_model, self.base.n_head):
                raise InputError(
                    f"Copied weights fix d_model={self.base.d_model} and n_head={self.base.n_head}; "
                    f"got d_model={d_model}, n_head={n_head}."
                )
            return module_from_layer(self.base, self.layer).use_score(self.score, seed=self.seed)
        return seeded_module(d_model, n_head, bias=self.bias, seed=self.seed, score=self.score)

    def describe(self) -> str:
        d_model, n_head = self.resolved()
        w = f"weights of layer {self.layer}" if self.weights == "pretrained" else f"random weights (seed {self.seed})"
        src = {"embeddings": "embedding", "hidden": f"layer {self.layer}", "random": f"random (seed {self.seed})"}
        mode = ", cross-attention" if self.cross else ""
        mode += f", {self.score.replace('_', ' ')} scores" if self.score != "scaled_dot" else ""
        return f"attnviz.MultiHeadAttention(d_model={d_model}, n_head={n_head}), {w}, {src[self.inputs]} inputs{mode}"

    @property
    def mirrors_layer(self) -> bool:
        """True when the module should reproduce pretrained layer `layer`: its weights on its inputs."""
        same_inputs = self.inputs == "hidden" or (self.inputs == "embeddings" and self.layer == 0)
        return self.weights == "pretrained" and same_inputs and not self.cross and self.score == "scaled_dot"

    def snippet(self, text: str) -> str:
        """Python that reproduces this view outside the dashboard."""
        d_model, n_head = self.resolved()
        model = "attnviz.load_model()" if self.base.name == "bundled" else f"attnviz.load_model({self.base.name!r})"
        args = [f"inputs={self.inputs!r}", f"weights={self.weights!r}", f"layer={self.layer}"]
        args += [f"score={self.score!r}"] if self.score != "scaled_dot" else []
        if self.weights != "pretrained":
            args = [f"d_model={d_model}", f"n_head={n_head}", f"bias={self.bias}", f"seed={self.seed}", *args]
        return (
            "import attnviz\nimport torch\n\n"
            f"model = {model}\n"
            f"src = attnviz.ModuleSource(model, {', '.join(args)})\n"
            f"trace = attnviz.trace(src, {text!r})\n"
            "trace.weights.shape  # [layer=1, head, query, key]; also trace.scores, .scaled, .masked\n\n"
            "# or the bare module on any vectors:\n"
            f"mha = attnviz.MultiHeadAttention(d_model={d_model}, n_head={n_head}, score={self.score!r})\n"
            f"out, stages = mha(torch.randn(1, 10, {d_model}))  # stages.weights: [batch, head, query, key]\n"
        )


ModuleSource.__init__ = checks.public(ModuleSource.__init__, name="ModuleSource")  # unknown fields: our error


def module_code() -> str:
    """The source of our attention (stages, split/merge, forward), to read next to what it draws."""
    import inspect

    from ..attention import additive_scores, stages_from_scores
    from .scores import ScoreFunction

    mha = MultiHeadAttention
    parts = [stages_from_scores, ScoreFunction.forward, additive_scores, mha.split_heads, mha.merge_heads, mha.forward]
    return "\n\n".join(inspect.getsource(p).rstrip() for p in parts)


def parity(module_trace: AttentionTrace, pretrained_trace: AttentionTrace, layer: int) -> float:
    """Largest |difference| between our module's weights and the pretrained model's at `layer`.

    ~1e-7 (float32 rounding) when the module copies that layer's weights and runs on its inputs:
    the evidence that our from-scratch attention computes what the library does.
    """
    ours = module_trace.weights[0]  # [head, query, key]
    if not 0 <= layer < pretrained_trace.n_layer:
        raise InputError(f"layer {layer} out of range 0..{pretrained_trace.n_layer - 1}")
    theirs = pretrained_trace.weights[layer]
    if ours.shape != theirs.shape or module_trace.tokens != pretrained_trace.tokens:
        raise InputError(f"cannot compare: our module gave {ours.shape}, the pretrained layer {theirs.shape}")
    return float(np.abs(ours.astype(np.float64) - theirs.astype(np.float64)).max())


def input_vectors(src: ModuleSource, text: str, pair=None, max_tokens=None):
    """([T, d_model] float tensor, tokens, notes) for a source and text."""
    d_model, _ = src.resolved()
    if src.inputs == "random":
        limit = token_limit(src.base.max_tokens, max_tokens)
        enc = encode(src.base.tokenizer, text, pair, limit)
        return seeded_vectors(len(enc.tokens), d_model, src.seed), enc.tokens, enc.notes
    layer = 0 if src.inputs == "embeddings" else src.layer
    return attention_inputs(src.base, text, layer, pair=pair, max_tokens=max_tokens)


def key_vectors(src: ModuleSource, pair, max_tokens) -> tuple[torch.Tensor, list[str]]:
    """Cross-attention's keys and values: the second sentence's vectors, or `n_keys` seeded vectors."""
    if pair is not None and pair.strip():
        x, tokens, _ = input_vectors(src, pair, None, max_tokens)
        return x, tokens
    d_model, _ = src.resolved()
    n = max(1, int(src.n_keys))
    return seeded_vectors(n, d_model, src.seed + 1), [f"k{i}" for i in range(n)]


def _visible(n_query: int, keys: list[str], hide, valid_keys) -> torch.Tensor:
    """[query, key] bool: keys not hidden and within the valid length."""
    mask = torch.ones(n_query, len(keys), dtype=torch.bool)
    mask[:, list(checks.positions("hide", hide, len(keys), "token positions"))] = False
    if valid_keys is not None:
        mask[:, max(0, int(valid_keys)) :] = False
    return mask


@checks.public(name="attnviz.trace")
def trace_module(
    src: ModuleSource,
    text: str,
    *,
    pair=None,
    causal: bool | None = None,
    hide=(),
    scale: float | None = None,
    fill: float | None = None,
    max_tokens: int | None = None,
) -> AttentionTrace:
    """Run our module over the sentence's vectors (self-attention, or cross-attention with `src.cross`)."""
    checks.text("text", text)
    causal, pair = checks.flag("causal", causal, none=True), checks.text("pair", pair, none=True)
    fill = checks.number("fill", fill, minus_inf=True, none=True)
    module = src.build()
    x, tokens, notes = input_vectors(src, text, None if src.cross else pair, max_tokens)
    kv, key_tokens = key_vectors(src, pair, max_tokens) if src.cross else (x, tokens)
    mask = _visible(len(tokens), key_tokens, hide, src.valid_keys if src.cross else None)
    fill = DEFAULT_FILL if fill is None else float(fill)
    scale = None if scale is None else check_scale(scale)
    with torch.inference_mode():  # the layer as the module's own forward computed it
        _, record = module(x, kv, kv, mask=mask, causal=causal, scale=scale, fill=fill, record=True)
    causal_used = module.causal if causal is None else causal
    hidden = checks.positions("hide", hide, len(key_tokens), "token positions")
    options = tuple(sorted(dict(pair=pair, causal=causal_used, hide=hidden, scale=scale, fill=fill).items()))
    provenance = Provenance(model=src.describe(), kind="module", options=options)
    return AttentionTrace(
        tokens, (record,), key_tokens=key_tokens, d_head=module.d_head, provenance=provenance, notes=tuple(notes)
    )
