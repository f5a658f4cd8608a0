"""Encoder-decoder models (T5, BART, Marian, ...): three attentions from one forward pass.

The source text goes through the encoder; the target text is fed to the decoder as the model is trained
(teacher forcing: the decoder reads the start token and the target shifted right by one), or is first
generated greedily by the model when no target is given. Each attention call is told apart by where its
module sits in the model: encoder self-attention, decoder self-attention (causal) and cross-attention
(decoder queries over encoder keys).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .. import checks
from ..errors import InputError
from ..trace import AttentionTrace, Provenance
from . import capacity, passes, recorder
from .encode import cut_text, encode, token_facts, token_limit
from .load import LoadedModel
from .probe import decoder_start, model_inputs
from .tracing import experiment

ROLES = ("encoder", "decoder", "cross")
#: What attnviz.trace takes for an encoder-decoder besides the source text.
OPTIONS = (
    "target",
    "max_tokens",
    "part",
    "pad_to",
    "pair",
    "values",
    "causal",
    "hide",
    "layers",
    "scale",
    "fill",
    "pad_mask",
)
MAX_GENERATED = 48


@dataclass(frozen=True)
class Seq2SeqTrace:
    """The three attentions of an encoder-decoder model on one source and target."""

    encoder: AttentionTrace  # source tokens over source tokens
    decoder: AttentionTrace  # target tokens over target tokens, causal
    cross: AttentionTrace  # target tokens (queries) over source tokens (keys)

    def part(self, role: str) -> AttentionTrace:
        if role not in ROLES:
            raise InputError(f"Choose one of {', '.join(ROLES)}, not {role!r}.")
        return getattr(self, role)

    @property
    def notes(self) -> tuple[str, ...]:
        return self.encoder.notes

    @property
    def nbytes(self) -> int:
        return sum(p.nbytes for p in (self.encoder, self.decoder, self.cross))


def target_encoding(loaded: LoadedModel, source_inputs: dict, target: str | None, limit: int):
    """(decoder input ids, their word ids, their sequence ids): the start token then the target shifted right, with
    the tokenizer's word and sequence ids shifted alike; a greedy generation has ids only (None, None)."""
    start = decoder_start(loaded.model)
    if start is None:
        raise InputError(f"{loaded.label} has no decoder_start_token_id; attnviz cannot feed its decoder.")
    if target is not None and str(target).strip():
        labels = loaded.tokenizer(text_target=target, truncation=True, max_length=limit)
        shifted = [None if f is None else (None, *f[:-1]) for f in token_facts(labels)]
        return [int(start)] + [int(i) for i in labels["input_ids"][:-1]], *shifted
    if not hasattr(loaded.model, "generate") or getattr(loaded.model, "lm_head", None) is None:
        raise InputError(f"{loaded.label} has no language-model head to generate with: type a target text.")
    with torch.inference_mode():
        out = loaded.model.generate(**source_inputs, max_new_tokens=min(limit, MAX_GENERATED), do_sample=False)
    return [int(i) for i in out[0, :-1]], None, None  # every generated token but the last is read by the decoder


def trace_seq2seq(
    loaded: LoadedModel,
    source: str,
    target: str | None = None,
    *,
    max_tokens=None,
    part=None,
    pad_to=None,
    pair=None,
    values=None,
    **options,
):
    """Trace an encoder-decoder model: `source` through the encoder, `target` (or a greedy generation) through
    the decoder. Returns a Seq2SeqTrace with .encoder, .decoder and .cross.

    options: an experiment (causal, hide, layers, scale, fill, pad_mask; see recorder.Experiment) applied to `part`'s
    attention inside the forward pass, so it reaches that part's later layers and the parts that read its output.
    hide indexes the part's keys (source tokens for encoder and cross, target tokens for the decoder). values: as
    attnviz.hf.tracing.trace_pretrained's, counting the source and target tokens."""
    checks.keywords("attnviz.trace", options, OPTIONS[6:])
    values = checks.flag("values", values, none=True)
    target, part = (
        checks.text("target", target, none=True),
        None if part is None else checks.choice("part", part, ROLES),
    )
    if pad_to or pair:
        raise InputError(
            "Padding and sentence pairs are not available for encoder-decoder models: attnviz feeds them "
            "one source text (and its target)."
        )
    limit = token_limit(loaded.max_tokens, max_tokens)
    enc = encode(loaded.tokenizer, source, None, limit)
    inputs = model_inputs(loaded, enc.inputs)
    inputs.pop("token_type_ids", None)
    if target is not None:  # cut before the tokenizer sees it, as encode cuts the source
        target, cut = cut_text(target, limit, "The target")
        enc.notes.extend(cut)
    ids, *tgt_facts = target_encoding(loaded, inputs, target, limit)
    inputs["decoder_input_ids"] = torch.tensor([ids], device=loaded.device)
    exp = _experiment(loaded, part, len(ids if part == "decoder" else enc.tokens), options)
    left_out = capacity.values_left_out(loaded, len(enc.ids) + len(ids), values)
    rec = recorder.Recorder(experiment=exp, roles=loaded.roles, outputs=loaded.outputs, values_left_out=left_out)
    parts = _recorded_parts(loaded, inputs, rec)
    tgt = [str(t) for t in loaded.tokenizer.convert_ids_to_tokens(ids)]
    asked = {k: getattr(exp, k) for k in options} | ({"experiment on": part} if options else {})
    asked |= {} if values is None else {"values": bool(values)}
    return _assemble(loaded, parts, enc, (tgt, ids, *tgt_facts), target, asked)


def _recorded_parts(loaded: LoadedModel, inputs: dict, rec: recorder.Recorder) -> dict[str, list]:
    """One forward pass through the seam; each recorded layer under its part (encoder, decoder, cross)."""
    try:
        passes.forward(loaded.model, inputs, rec)
    except recorder.CaptureRefused as e:
        raise InputError(f"{loaded.label} asked for {e}, which attnviz cannot capture.") from None
    parts = {role: [] for role in ROLES}
    for module, record in zip(rec.modules, rec.layers):
        parts[loaded.roles[module]].append(record)
    return parts


def _experiment(loaded: LoadedModel, part: str | None, n_keys: int, options: dict) -> recorder.Experiment:
    """The checked experiment on `part`; one that changes attention needs a part (it is never applied to all three)."""
    if part is not None and part not in ROLES:
        raise InputError(f"Choose one of {', '.join(ROLES)}, not {part!r}.")
    n_layer = loaded.layers_per_role[part] if part else None
    exp = experiment(loaded, n_keys, part=part, n_layer=n_layer, **options)
    if part is None and (exp.changes_attention or (exp.layers is not None and not exp.pad_mask)):
        raise InputError(
            "On an encoder-decoder model an experiment changes one attention: pass part='encoder', 'decoder' or "
            "'cross' with it."
        )
    return exp


def _assemble(loaded, parts, enc, tgt, target, asked: dict) -> Seq2SeqTrace:
    """The three parts as traces; tgt: the target's (tokens, ids, word ids, sequence ids)."""
    tokens, ids, word_ids, sequence_ids = tgt

    def provenance(role, ids):
        opts = (("part", role), ("target", target or "generated greedily"), *sorted(asked.items()))
        return Provenance(
            loaded.label,
            "pretrained",
            loaded.revision,
            loaded.dtype,
            loaded.device,
            "attnviz seam over sdpa",
            opts,
            tuple(ids),
            enc.n_dropped,
        )

    generated = "" if target else loaded.tokenizer.decode(ids[1:], skip_special_tokens=True)  # after the start token
    notes = tuple(enc.notes) + (() if target else (f"The target was generated greedily by the model: “{generated}”",))
    source = dict(word_ids=enc.word_ids, sequence_ids=enc.sequence_ids)
    common = dict(d_head=loaded.d_head, notes=notes)
    return Seq2SeqTrace(
        encoder=AttentionTrace(
            enc.tokens, tuple(parts["encoder"]), provenance=provenance("encoder", enc.ids), **source, **common
        ),
        decoder=AttentionTrace(
            tokens,
            tuple(parts["decoder"]),
            provenance=provenance("decoder", ids),
            word_ids=word_ids,
            sequence_ids=sequence_ids,
            **common,
        ),
        cross=AttentionTrace(
            tokens,
            tuple(parts["cross"]),
            key_tokens=enc.tokens,
            provenance=provenance("cross", ids),
            word_ids=word_ids,
            sequence_ids=sequence_ids,
            key_word_ids=enc.word_ids,
            key_sequence_ids=enc.sequence_ids,
            **common,
        ),
    )
