"""Everything that touches transformers: loading (load), the capture seam (capture), tracing a sentence
(tracing), tokenizing (encode), what may be loaded (access), the stages of families with their own attention code
(readers) and copying a layer into our module (layers).
No other attnviz module imports transformers."""

from .layers import module_from_layer
from .load import BUNDLED, LoadedModel, bundled_model_path, from_model, load_model
from .tracing import attention_inputs, trace_pretrained

__all__ = ["BUNDLED", "LoadedModel", "attention_inputs", "bundled_model_path", "from_model", "load_model", "module_from_layer",
           "trace_pretrained"]  # fmt: skip
