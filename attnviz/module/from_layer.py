"""One pretrained attention layer copied into our from-scratch MultiHeadAttention (BERT-style and GPT-2 layouts;
the projections are read by attnviz.hf.layers)."""

from __future__ import annotations

import torch

from .. import checks
from ..errors import ArgumentTypeError, InputError, check_index
from ..hf.layers import projections
from ..hf.load import LoadedModel
from .multihead import MultiHeadAttention


@checks.public(name="attnviz.module_from_layer")
def module_from_layer(loaded: LoadedModel, layer: int) -> MultiHeadAttention:
    """Our module with the projections of `loaded`'s attention layer `layer`.

    Run on the vectors entering that layer (`attnviz.attention_inputs`), it reproduces the layer's attention
    weights and output (before the residual connection).
    """
    if not isinstance(loaded, LoadedModel):
        raise ArgumentTypeError(
            "loaded",
            f"module_from_layer needs a model from attnviz.load_model() as loaded, not {type(loaded).__name__}.",
        )
    if not loaded.attention_modules:
        raise InputError(f"{loaded.label} computes attention in its own code; its layers cannot be copied.")
    layer = check_index("layer", layer, loaded.n_layer)
    proj = projections(loaded, layer)
    d_model = proj["w_q"].shape[1]
    ours = MultiHeadAttention(d_model, loaded.n_head, bias=proj["b_q"] is not None, causal=proj["causal"])
    with torch.no_grad():
        for name in ("q", "k", "v", "o"):
            lin = getattr(ours, f"w_{name}")
            lin.weight.copy_(proj[f"w_{name}"])
            if proj[f"b_{name}"] is not None:
                lin.bias.copy_(proj[f"b_{name}"])
    return ours
