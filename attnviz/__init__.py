"""attnviz: see every stage of transformer attention (scores, scaled, masked, weights).

    import attnviz
    model = attnviz.load_model()                    # bundled all-MiniLM-L6-v2, offline
    trace = attnviz.trace(model, "The cat sat on the mat.")
    trace.weights.shape                             # [layer, head, query, key]
"""

from __future__ import annotations

from .attention import (
    FILLS,
    MultiHeadAttention,
    Stages,
    attention,
    causal_mask,
    seeded_module,
    seeded_vectors,
    softmax,
    stages_from_scores,
    valid_length_mask,
)
from .errors import AttnvizError, InputError, ModelLoadError
from .models import BUNDLED, LoadedModel, attention_inputs, load_model, trace_pretrained
from .own import ModuleSource, trace_module
from .scaling import LawRow, sqrt_d_law
from .trace import STAGES, AttentionTrace

__version__ = "0.1.0"


def trace(model, text: str, **options) -> AttentionTrace:
    """Trace attention on `text` for a LoadedModel (pretrained) or a ModuleSource (our own module).

    Options for pretrained models: pair, pad_to, pad_mask, causal, hide, layers, scale, fill, max_tokens.
    Options for our module: pair, causal, hide, scale, fill, max_tokens.
    """
    if isinstance(model, ModuleSource):
        return trace_module(model, text, **options)
    if isinstance(model, LoadedModel):
        return trace_pretrained(model, text, **options)
    raise AttnvizError(
        f"attnviz.trace needs a model from attnviz.load_model() or an attnviz.ModuleSource, got {type(model).__name__}."
    )


__all__ = [
    "AttentionTrace",
    "AttnvizError",
    "BUNDLED",
    "FILLS",
    "InputError",
    "LawRow",
    "LoadedModel",
    "ModelLoadError",
    "ModuleSource",
    "MultiHeadAttention",
    "STAGES",
    "Stages",
    "attention",
    "attention_inputs",
    "causal_mask",
    "load_model",
    "seeded_module",
    "seeded_vectors",
    "softmax",
    "sqrt_d_law",
    "stages_from_scores",
    "trace",
    "valid_length_mask",
]
