"""Everything that touches transformers: loading (load), the capture seam (capture), tracing a sentence
(tracing), tokenizing (encode), what may be loaded (access), the stages of families with their own attention code
(readers) and a layer's projections for our module to copy (layers).
No other attnviz module imports transformers."""

from .load import BUNDLED, LoadedModel, bundled_model_path, from_model, load_model
from .progress import quiet_tqdm_auto
from .tracing import attention_inputs, trace_pretrained

quiet_tqdm_auto()  # every module here imports transformers inside its functions: this runs before any of them

__all__ = [
    "BUNDLED",
    "LoadedModel",
    "attention_inputs",
    "bundled_model_path",
    "from_model",
    "load_model",
    "trace_pretrained",
]
