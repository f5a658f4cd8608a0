"""The record of one forward pass and everything that reads it.

record        AttentionTrace and its Provenance: tokens, ids, layers, what produced it
layers        the two kinds of layer: LayerRecord (what the stages are made from) and GivenWeights
reads         the checks every read shares: heads, windows, read-only copies
values        the value reads (values, output norms) every trace shares
mask          a boolean mask kept by its structure (causal, window, visible keys, exceptions)
row_norms     each row's log-sum-exp, so a key window keeps every key in the softmax
output_norms  how much each head writes from each key, ||v W_O[h]||
given         final weights handed in (transformers' `attentions`, an array)
generation    which tokens a model wrote
window_cache  the dashboard's recently read windows, beside the traces (weak references)
save          the .npz trace file written (format 2: what each layer's stages are made from)
file          the .npz trace file read back within bounds (file_bounds: directory and headers; file_layers: format 2;
              file_dense: format 1's dense stages and given weights)
"""

from .record import NOTEBOOK_VIEW, STAGES, AttentionTrace, GivenWeights, LayerFacts, LayerRecord, Provenance, Values

__all__ = [
    "NOTEBOOK_VIEW",
    "STAGES",
    "AttentionTrace",
    "GivenWeights",
    "LayerFacts",
    "LayerRecord",
    "Provenance",
    "Values",
]
