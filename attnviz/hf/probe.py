"""The load-time probe: one tiny forward pass that learns what a model just loaded really does.

Whether it calls attnviz's capture seam (and once per layer), or computes attention in its own code that
attnviz.hf.readers reads, or gives only eager weights; the shapes of its attention layers (heads, the dimension q.k sums
over) and, for an encoder-decoder, each attention module's role. `probe` returns all of it as one `Found` record, from
which attnviz.hf.load builds the frozen LoadedModel once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

import torch

from ..errors import InputError, ModelLoadError, first_line
from . import output_projection, passes, readers, recorder
from .encode import encode

INSTEAD = "Use a model with softmax attention, such as 'bert-base-uncased' or 'gpt2', or the bundled all-MiniLM-L6-v2."


@dataclass(frozen=True)
class Subject:
    """What the probe runs: a model just loaded (or handed over) and how to feed it, before anything is known."""

    label: str
    model: Any = field(repr=False)
    tokenizer: Any = field(repr=False)
    max_tokens: int
    device: str
    inputs: frozenset | None  # the encoded inputs its forward names
    captures: bool  # it accepted the capture seam's name


#: How a model's attention is read, decided once by the load probe: "seam" (transformers' attention through attnviz's
#: capture seam: every stage), "readers" (a family's own attention code, read by attnviz.hf.readers: every stage),
#: "weights" (its eager weights only, with a note saying why).
Route = Literal["seam", "readers", "weights"]


@dataclass(frozen=True)
class Found:
    """What the load probe found: the route, the shapes of the attention layers, their modules and, for an
    encoder-decoder, each module's role."""

    route: Route
    n_layer: int
    n_head: int
    d_head: int
    attention_modules: tuple = ()
    roles: dict = field(default_factory=dict)
    layers_per_role: dict = field(default_factory=dict)
    note: str = ""
    outputs: dict = field(default_factory=dict)  # attention module -> its output projection (values: output_projection)


def probe(subject: Subject) -> Found:
    """Run one tiny forward to learn the shapes and whether the model really calls the seam.

    Some families accept the implementation name and never call it (DeBERTa-v2, XLNet), or need math the seam
    does not reproduce (softcapping, attention sinks): those switch to eager, weights-only unless attnviz.hf.readers
    reads their own code (`_readers`).
    """
    inputs, refused = probe_inputs(subject), ""
    if subject.captures:
        rec, refused = _seam_probe(subject, inputs)
        if rec.layers:
            _check_token_to_token(subject, inputs, rec)
            return _learned_shapes(subject, rec, "seam")
        if getattr(subject.model.config, "is_encoder_decoder", False):
            why = f"it calls attention with {refused.removeprefix('attention with ')}, which attnviz cannot reproduce"
            raise ModelLoadError(
                f"{subject.label!r} is an encoder-decoder model whose attention attnviz cannot capture "
                f"({why if refused else 'it computes attention in its own code'}). "
                "T5, BART, Marian, mBART and Pegasus are supported."
            )
        use_eager(subject.model)
    shapes = _eager_shapes(subject)
    rec, note = _readers(subject)
    if rec is not None:  # shapes as the records have them (ConvBERT's heads are half the usual width)
        return _learned_shapes(subject, rec, "readers")
    if refused and not note:  # say the real reason, not "its own code"
        note = f"its attention is called with {refused.removeprefix('attention with ')}, which attnviz cannot reproduce"
    return Found("weights", *shapes, note=note)


def _seam_probe(subject: Subject, inputs: dict) -> tuple:
    """(the Recorder of one forward through the seam, why the seam refused it or ""); a model that fails on the
    sentence or calls attention twice per layer is refused."""
    rec, refused = recorder.Recorder(), ""
    try:
        passes.forward(subject.model, inputs, rec)
    except recorder.CaptureRefused as e:
        rec.layers.clear()
        refused = str(e)
    except Exception as e:  # noqa: BLE001 - a model that cannot run one sentence cannot be traced
        raise ModelLoadError(
            f"{subject.label!r} cannot be traced: it failed on a test sentence ({first_line(e, 200).rstrip('.')}). "
            f"{INSTEAD}"
        ) from None
    if len(set(rec.modules)) < len(rec.modules) and _calls_per_forward(subject, inputs, rec) > 1:
        raise ModelLoadError(
            f"{subject.label!r} calls attention twice in each layer and subtracts the second map from the first "
            "(differential attention, as in DiffLlama): no single map per layer shows what it attends to, and "
            f"attnviz would show two layers for one. {INSTEAD}"
        )
    return rec, refused


def _readers(subject: Subject) -> tuple:
    """An own-code family attnviz knows (attnviz.hf.readers): (its Recorder, "") once checked on a plain and a padded
    text; (None, why) when the check failed; (None, "") for any other family."""
    text = " ".join(["hello world"] * 8)
    plain = encode(subject.tokenizer, text, limit=subject.max_tokens)
    padded = encode(subject.tokenizer, text, limit=subject.max_tokens, pad_to=len(plain.ids) + 3)
    return readers.install(subject.model, [model_inputs(subject, e.inputs) for e in (plain, padded)])


def _eager_shapes(subject: Subject) -> tuple[int, int, int]:
    """(layers, heads, head dimension) of a weights-only model, refusing weights that are not one token-by-token map
    per head. A sentence of 16 words shows chunked or bucketed attention for what it is (Reformer)."""
    inputs = model_inputs(
        subject, encode(subject.tokenizer, " ".join(["hello world"] * 8), limit=subject.max_tokens).inputs
    )
    try:
        att = [a for a in passes.forward_eager(subject.model, inputs) if a is not None]  # hybrids: attention only
    except InputError as e:
        raise ModelLoadError(f"{subject.label!r} cannot be traced: {e} {INSTEAD}") from None
    if not att:
        raise ModelLoadError(
            f"{subject.label!r} returned no attention weights at all: it has no softmax attention attnviz can read "
            f"(state-space, recurrent or linear-attention layers, as in Mamba, RWKV or xLSTM). {INSTEAD}"
        )
    n = inputs["input_ids"].shape[-1]
    if any(a.dim() != 4 or tuple(a.shape[-2:]) != (n, n) for a in att):
        shape = tuple(next(a for a in att if a.dim() != 4 or tuple(a.shape[-2:]) != (n, n)).shape)
        raise ModelLoadError(
            f"{subject.label!r} does not attend token to token: its attention weights come as {shape} for {n} tokens, "
            f"not a [head, query, key] map (local windows, hashed buckets or an approximation of softmax). {INSTEAD}"
        )
    n_head, hd = int(att[0].shape[1]), getattr(subject.model.config, "head_dim", None)
    d_model = int(subject.model.config.hidden_size)
    return len(att), n_head, hd if isinstance(hd, int) and hd > 0 else d_model // n_head  # GLM-5-Next: head_dim 0


def _calls_per_forward(subject: Subject, inputs: dict, rec) -> float:
    """Seam calls per forward of an attention module: 1 even when a module is reused (ALBERT shares one across
    layers), 2 for differential attention (DiffLlama calls the seam twice in one forward)."""
    runs = []
    hooks = [m.register_forward_pre_hook(lambda *_: runs.append(1)) for m in set(rec.modules)]
    try:
        again = recorder.Recorder()
        passes.forward(subject.model, inputs, again)
    finally:
        for h in hooks:
            h.remove()
    return len(again.layers) / max(len(runs), 1)


def use_eager(model) -> None:
    """Switch a loaded model to eager attention, masks included.

    Families that compute attention in their own code (BLOOM) refuse set_attn_implementation (transformers 5.23 only
    logs a warning for a class it judges unable to switch) and keep building their masks with the seam's mask
    function (boolean, where they add an additive one). No public call switches them after loading: the config's
    `_attn_implementation` setter is private as well, and the one public route, from_pretrained(
    attn_implementation="eager"), would read every weight a second time. So the configs the public call left behind
    get the field it writes itself, `_attn_implementation_internal` (tests/hf/test_family_matrix.py checks BLOOM).
    """
    model.set_attn_implementation("eager")
    configs, seen = [getattr(m, "config", None) for m in model.modules()], set()
    while configs:
        cfg = configs.pop()
        if cfg is None or id(cfg) in seen or not hasattr(cfg, "sub_configs"):  # not a transformers config
            continue
        seen.add(id(cfg))
        if cfg._attn_implementation != "eager":  # a read transformers' own docs use; there is no public getter
            cfg._attn_implementation_internal = "eager"  # no public setter: see above
        configs += [getattr(cfg, key, None) for key in getattr(cfg, "sub_configs", None) or {}]


def _check_token_to_token(subject: Subject, inputs: dict, rec) -> None:
    """Refuse a decoder or encoder whose captured attention is not over its tokens (BLT: bytes and patches)."""
    if getattr(subject.model.config, "is_encoder_decoder", False):
        return  # cross attention maps decoder to encoder tokens: checked per role
    n = inputs["input_ids"].shape[-1]
    for module, r in zip(rec.modules, rec.layers):
        n_q, n_k = r.q.shape[-2], r.k.shape[-2]
        if (n_q, n_k) != (n, n):
            name = next((name for name, m in subject.model.named_modules() if m is module), "")
            raise ModelLoadError(
                f"{subject.label!r} does not attend token to token: its attention {name!r} maps "
                f"{n_q} queries to {n_k} keys for {n} tokens (it attends over units it builds from the tokens, such "
                f"as patches of bytes), not a [head, query, key] map of the tokens. {INSTEAD}"
            )


def _learned_shapes(subject: Subject, rec, route: Route) -> Found:
    """What a probe's Recorder shows: attention modules in call order, heads and head dimension, and for an
    encoder-decoder each module's role (its n_layer is the encoder's)."""
    modules, n_head, d_head = tuple(rec.modules), int(rec.layers[0].q.shape[0]), int(rec.layers[0].q.shape[-1])
    outputs = output_projection.find_all(subject.model, rec)
    if not getattr(subject.model.config, "is_encoder_decoder", False):
        return Found(route, len(rec.layers), n_head, d_head, modules, outputs=outputs)
    names = {m: n for n, m in subject.model.named_modules()}
    roles = {m: role_of(names[m]) for m in modules}
    per_role = {r: list(roles.values()).count(r) for r in ("encoder", "decoder", "cross")}
    missing = [r for r, n in per_role.items() if n == 0]
    if missing:
        raise ModelLoadError(
            f"{subject.label!r} is an encoder-decoder model whose {' and '.join(missing)} attention attnviz cannot "
            "capture (it is computed in the model's own code), so its three attentions cannot be shown together. "
            "T5, BART, Marian, mBART and Pegasus are supported."
        )
    return Found(route, per_role["encoder"], n_head, d_head, modules, roles, per_role, outputs=outputs)


def role_of(module_name: str) -> str:
    """encoder / decoder / cross, from where an attention module sits (BART, T5, Marian, Pegasus naming)."""
    low = module_name.lower()
    if "encoder_attn" in low or "encdecattention" in low or "cross" in low:
        return "cross"
    return "encoder" if low.startswith("encoder") or ".encoder." in f".{low}" else "decoder"


def probe_inputs(subject: Subject) -> dict:
    """A two-word input on the model's device; encoder-decoders also get a two-token decoder input."""
    try:
        enc = encode(subject.tokenizer, "hello world", limit=subject.max_tokens)
    except InputError as e:
        raise ModelLoadError(
            f"{subject.label!r} cannot be traced: its tokenizer fails on 'hello world' ({e})"
        ) from None
    inputs = model_inputs(subject, enc.inputs)
    config = subject.model.config
    if getattr(config, "is_encoder_decoder", False):
        start = decoder_start(subject.model)
        if start is None:
            raise ModelLoadError(
                f"{subject.label!r} is an encoder-decoder model whose config names no decoder_start_token_id, so "
                "attnviz cannot feed its decoder. Add decoder_start_token_id to its config.json (T5 uses its pad "
                "token id, BART its eos token id)."
            )
        inputs["decoder_input_ids"] = torch.tensor([[start, start]], device=subject.device)
    return inputs


def decoder_start(model) -> int | None:
    """The decoder's start token id, from the config or the generation config; None when neither names one."""
    for source in (model.config, getattr(model, "generation_config", None)):
        start = getattr(source, "decoder_start_token_id", None)
        if isinstance(start, int):
            return start
    return None


def model_inputs(loaded, inputs: dict) -> dict:
    """The encoded tensors its forward takes, on the model's device (a BERT-style tokenizer saved next to a Llama
    adds token_type_ids, which Llama's forward would pass on to its attention as an unknown keyword). `loaded`: a
    LoadedModel or a Subject (anything with `inputs` and `device`)."""
    names = loaded.inputs
    return {k: v.to(loaded.device) for k, v in inputs.items() if names is None or k in names}
