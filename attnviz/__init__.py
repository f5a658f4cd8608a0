"""attnviz: see every stage of transformer attention (scores, scaled, masked, weights).

import attnviz
model = attnviz.load_model()                    # bundled all-MiniLM-L6-v2, offline
trace = attnviz.trace(model, "The cat sat on the mat.")
trace.stages(0).weights.shape                   # [head, query, key]
"""

from __future__ import annotations

from . import checks
from .ablation import Ablation, TokenChange
from .analysis.law import LawRow, sqrt_d_law
from .attention import (
    DEFAULT_FILL,
    Stages,
    attention,
    causal_mask,
    default_scale,
    softmax,
    stages_from_scores,
    valid_length_mask,
)
from .corpus import HeadProfile, open_profile, profile
from .errors import ArgumentError, ArgumentTypeError, AttnvizError, InputError, ModelLoadError
from .hf import BUNDLED, LoadedModel, attention_inputs, from_model, load_model, trace_pretrained
from .hf.ablate import ablate
from .hf.generate import generate
from .hf.seq2seq import OPTIONS as SEQ2SEQ_OPTIONS
from .hf.seq2seq import Seq2SeqTrace, trace_seq2seq
from .hf.tracing import OPTIONS as PRETRAINED_OPTIONS
from .module.from_layer import module_from_layer
from .module.multihead import MultiHeadAttention, seeded_module, seeded_vectors
from .module.tracing import MODULE_OPTIONS, ModuleSource, trace_module
from .notebook import Figures, show
from .trace import STAGES, AttentionTrace, LayerRecord, Provenance
from .trace.generation import Generation, Segment

__version__ = "0.2.0"


def trace(source, text: str, **options) -> AttentionTrace | Seq2SeqTrace:
    """Trace attention on `text` for a LoadedModel (pretrained) or a ModuleSource (our own module).

    Options for pretrained models: pair, pad_to, pad_mask, causal, hide, layers, scale, fill, max_tokens, values
    (True keeps the values, False leaves them out; by default they are kept unless the trace would then hold more
    than 12 GiB, attnviz.hf.capacity.VALUES_BUDGET).
    Encoder-decoder models take `target=` (the decoder's text; None: generated greedily) and return a
    Seq2SeqTrace with .encoder, .decoder and .cross.
    Options for our module: pair, causal, hide, scale, fill, max_tokens.
    Every argument is checked before any work (attnviz.checks): a wrong one raises an ArgumentError naming it.
    """
    checks.text("text", text)
    if isinstance(source, LoadedModel):
        checks.keywords("attnviz.trace", options, SEQ2SEQ_OPTIONS if source.is_seq2seq else PRETRAINED_OPTIONS)
    elif isinstance(source, ModuleSource):
        checks.keywords("attnviz.trace", options, MODULE_OPTIONS)
    if isinstance(source, ModuleSource):
        return trace_module(source, text, **options)
    if isinstance(source, LoadedModel) and source.is_seq2seq:
        return trace_seq2seq(source, text, **options)
    if isinstance(source, LoadedModel):
        return trace_pretrained(source, text, **options)
    raise ArgumentTypeError(
        "source",
        f"attnviz.trace needs a model from attnviz.load_model() or an attnviz.ModuleSource as its source, "
        f"not {type(source).__name__}.",
    )


__all__ = [
    "Ablation",
    "ArgumentError",
    "ArgumentTypeError",
    "AttentionTrace",
    "AttnvizError",
    "BUNDLED",
    "DEFAULT_FILL",
    "Figures",
    "Generation",
    "HeadProfile",
    "InputError",
    "LawRow",
    "LayerRecord",
    "LoadedModel",
    "ModelLoadError",
    "ModuleSource",
    "MultiHeadAttention",
    "Provenance",
    "STAGES",
    "Segment",
    "Seq2SeqTrace",
    "Stages",
    "TokenChange",
    "ablate",
    "attention",
    "attention_inputs",
    "causal_mask",
    "default_scale",
    "from_model",
    "generate",
    "load_model",
    "module_from_layer",
    "open_profile",
    "profile",
    "seeded_module",
    "seeded_vectors",
    "show",
    "softmax",
    "sqrt_d_law",
    "stages_from_scores",
    "trace",
    "valid_length_mask",
]
