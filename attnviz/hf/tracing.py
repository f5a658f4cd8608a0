"""Tracing a pretrained model on a sentence: encode, run one forward pass with the seam recording, assemble."""

from __future__ import annotations

import numpy as np
import torch

from .. import checks
from ..attention import check_scale
from ..errors import ArgumentTypeError, InputError
from ..trace import AttentionTrace, Provenance
from . import capacity, passes, readers, recorder
from .encode import Encoded, encode, token_limit
from .load import LoadedModel
from .probe import model_inputs

#: What attnviz.trace takes for a pretrained model besides the text (`experiment` checks the last six).
OPTIONS = ("pair", "pad_to", "max_tokens", "values", "causal", "hide", "layers", "scale", "fill", "pad_mask")
WEIGHTS_ONLY_NOTE = "{}: only the weights stage is available ({})."
#: Why a family traced through eager attention gives no other stage (`AttentionTrace.why_not` says it).
OWN_CODE = "this model family computes attention inside its own code, so only the final weights are available"
IMPLEMENTATION = {
    "seam": "attnviz seam over sdpa",
    "readers": "eager; stages read from the model's own attention code",
    "weights": "eager",
}


def experiment(
    loaded: LoadedModel,
    n_tokens: int,
    *,
    causal=False,
    hide=(),
    layers=None,
    scale=None,
    fill=None,
    pad_mask=True,
    part=None,
    n_layer=None,
) -> recorder.Experiment:
    """A checked Experiment: positions and layers in range, a usable scale.

    part / n_layer: an encoder-decoder's attention under the experiment and its number of layers (n_tokens is then
    the number of that part's keys)."""
    if part is not None and part not in loaded.layers_per_role:
        raise InputError(f"{loaded.label} has no {part!r} attention to experiment on.")
    causal, pad_mask = checks.flag("causal", causal), checks.flag("pad_mask", pad_mask)
    scale = None if scale is None else check_scale(scale)
    fill = checks.number("fill", fill, minus_inf=True, none=True)
    hide = checks.positions("hide", hide, n_tokens, "token positions")
    n_layer = loaded.n_layer if n_layer is None else n_layer
    layers = None if layers is None else checks.positions("layers", layers, n_layer, "layers")
    return recorder.Experiment(causal, hide, scale, fill, pad_mask, layers, part)


def trace_pretrained(
    loaded: LoadedModel, text: str, *, pair=None, pad_to=None, max_tokens=None, whole_forward=True, **options
):
    """Trace `text` (and an optional second sentence) through `loaded`.

    options: causal, hide, layers, scale, fill, pad_mask (see recorder.Experiment); values (True keeps the values, False
    leaves them out, None keeps them unless the trace would then hold more than capacity.VALUES_BUDGET); max_tokens
    caps the text. whole_forward: see trace_encoded (the same trace either way; the dashboard and a corpus profile,
    which read the records alone, end the forward after the last attention call; attnviz.trace runs all of it).
    """
    checks.keywords("attnviz.trace", options, OPTIONS[3:])
    pad_to = checks.whole("pad_to", pad_to, low=1, high=checks.MAX_TOKENS, none=True)
    whole_forward = checks.flag("whole_forward", whole_forward)
    enc = encode(loaded.tokenizer, text, pair, token_limit(loaded.max_tokens, max_tokens), pad_to)
    asked = dict(pair=enc.pair, pad_to=pad_to)  # the pair as traced
    return trace_encoded(loaded, enc, asked, whole_forward=whole_forward, **options)


def trace_encoded(
    loaded: LoadedModel, enc: Encoded, asked: dict, *, generation=None, values=None, whole_forward=True, **options
) -> AttentionTrace:
    """Trace tokens already encoded (a text, or a prompt and what the model generated); `asked` joins the
    provenance's options, `generation` (attnviz.trace.generation.Generation) says which tokens the model wrote, `values`
    whether the trace keeps the values (see trace_pretrained). whole_forward=False ends the forward pass after the
    last attention call, for a caller that reads the records alone (the dashboard, a corpus profile): the last layer's
    feed-forward and the model's output are then never computed, and hooks on them never run (attnviz.ablate reads the
    output); the trace is the same."""
    exp = experiment(loaded, len(enc.tokens), **options)
    values = checks.flag("values", values, none=True)
    asked = dict(asked, **{k: getattr(exp, k) for k in options}, **({} if values is None else {"values": values}))
    provenance = Provenance(
        model=loaded.label,
        kind="pretrained",
        revision=loaded.revision,
        dtype=loaded.dtype,
        device=loaded.device,
        attn_implementation=IMPLEMENTATION[loaded.route],
        options=tuple(sorted(asked.items())),
        input_ids=tuple(enc.ids),
        n_dropped=enc.n_dropped,
    )
    common = dict(
        d_head=loaded.d_head,
        provenance=provenance,
        word_ids=enc.word_ids,
        sequence_ids=enc.sequence_ids,
        generation=generation,
    )
    if loaded.route == "readers":
        _check_own(loaded, exp)
    if loaded.route != "weights":
        left_out = capacity.values_left_out(loaded, len(enc.ids), values)
        return AttentionTrace(
            enc.tokens, _captured(loaded, enc, exp, left_out, whole_forward), notes=tuple(enc.notes), **common
        )
    return _given_weights(loaded, enc, exp, common)


def _check_own(loaded: LoadedModel, exp: recorder.Experiment) -> None:
    """Own-code families run their own attention code: an experiment it would not apply is refused, never ignored."""
    if exp.changes_attention or (not exp.pad_mask and exp.layers is not None):
        raise InputError(
            f"{loaded.label} computes attention inside its own code: attnviz reads every stage from it but cannot change "
            "its mask or scale, so causal, hidden tokens, scale, fill and per-layer padding experiments are not "
            "available for it (the bundled model has them)."
        )


def _captured(
    loaded: LoadedModel, enc: Encoded, exp: recorder.Experiment, values_left_out: str | None, whole_forward: bool
) -> tuple:
    inputs = model_inputs(loaded, enc.inputs)
    if not exp.pad_mask and enc.pad_keys is not None:
        inputs["attention_mask"] = torch.ones_like(
            inputs["attention_mask"]
        )  # layers outside the experiment put it back
    own_code = loaded.route == "readers"
    rec = recorder.Recorder(
        experiment=exp,
        pad_keys=enc.pad_keys,
        own_code=own_code,
        outputs=loaded.outputs,
        values_left_out=values_left_out,
        **({} if whole_forward else recorder.until_last(loaded)),
    )
    try:
        passes.forward(loaded.model, inputs, rec)  # whole_forward=False: ends after the last attention call
    except recorder.CaptureRefused as e:
        raise InputError(f"{loaded.label} asked for {e}, which attnviz cannot capture.") from None
    if len(rec.layers) != loaded.n_layer:
        raise InputError(f"Captured {len(rec.layers)} attention calls, expected {loaded.n_layer}.")
    return tuple(rec.layers)


def _given_weights(loaded: LoadedModel, enc: Encoded, exp: recorder.Experiment, common: dict) -> AttentionTrace:
    if exp.changes_attention:
        raise InputError(
            f"{loaded.label} computes attention inside its own code, so attnviz cannot change its mask or scale: "
            "causal, hidden tokens, scale and fill experiments need a model with all stages (the bundled one has them)."
        )
    inputs = model_inputs(loaded, enc.inputs)
    if not exp.pad_mask and enc.pad_keys is not None:
        inputs["attention_mask"] = torch.ones_like(inputs["attention_mask"])
    attentions = [a for a in passes.forward_eager(loaded.model, inputs) if a is not None]  # hybrids: attention only
    if readers.eager_gives_scores(loaded.model):  # SqueezeBERT returns its masked scores: the weights are their softmax
        attentions = [a.float().softmax(-1) for a in attentions]
    weights = np.stack([a[0].float().cpu().numpy() for a in attentions])
    why = loaded.note or "it computes attention inside its own code"
    notes = (*enc.notes, WEIGHTS_ONLY_NOTE.format(loaded.label, why))
    return AttentionTrace.from_weights(enc.tokens, weights, loaded.note or OWN_CODE, notes=notes, **common)


@checks.public(name="attnviz.attention_inputs")
def attention_inputs(loaded: LoadedModel, text: str, layer: int, *, pair=None, max_tokens=None):
    """The vectors that enter layer `layer`'s attention for this text: ([T, d_model] tensor, tokens, notes).

    Layer 0's input is the embedding output; for pre-LayerNorm models (GPT-2) it is the normed input,
    i.e. exactly what the attention projections see.
    """
    if not isinstance(loaded, LoadedModel):
        raise ArgumentTypeError(
            "loaded",
            f"attention_inputs needs a model from attnviz.load_model() as loaded, not {type(loaded).__name__}.",
        )
    checks.text("text", text), checks.text("pair", pair, none=True)
    checks.whole("max_tokens", max_tokens, low=1, high=checks.MAX_TOKENS, none=True)
    layer = checks.check_index("layer", layer, loaded.n_layer)
    if not loaded.attention_modules:
        raise InputError(f"{loaded.label} computes attention in its own code; its attention inputs cannot be read.")
    enc = encode(loaded.tokenizer, text, pair, token_limit(loaded.max_tokens, max_tokens))
    seen = {}

    def grab(module, args, kwargs):
        x = (args[0] if args else kwargs.get("hidden_states")).detach()[0]
        reader = readers.reader_of(module)
        seen.setdefault("x", (x.T if reader and reader.channels_first else x).float().cpu().clone())
        raise recorder.InputsRead  # the layers after this one would be computed for nothing

    handle = loaded.attention_modules[layer].register_forward_pre_hook(grab, with_kwargs=True)
    try:
        passes.forward(loaded.model, model_inputs(loaded, enc.inputs), recorder.Recorder())  # ends at `grab`
    finally:
        handle.remove()
    return seen["x"], enc.tokens, enc.notes
