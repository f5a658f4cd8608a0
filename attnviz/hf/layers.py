"""One pretrained attention layer's projections, as plain tensors our from-scratch MultiHeadAttention copies
(attnviz.module.from_layer), and its output projection.

Two layouts are supported: BERT-style (separate query/key/value linears and an output dense) and GPT-2
(one packed Conv1D for q|k|v and a Conv1D output). Layers with rotary positions or shared key/value
heads have no equivalent in our module and are refused with a message.
"""

from __future__ import annotations

import torch

from ..errors import InputError, check_index
from .load import LoadedModel


def output_projection(loaded: LoadedModel, layer: int) -> torch.nn.Module:
    """The module that mixes layer `layer`'s heads back to d_model (BERT: output.dense; GPT-2: c_proj)."""
    mod = loaded.attention_modules[check_index("layer", layer, loaded.n_layer)]
    if hasattr(mod, "c_proj"):
        return mod.c_proj
    names = {m: n for n, m in loaded.model.named_modules()}
    parent = loaded.model.get_submodule(names[mod].rsplit(".", 1)[0])
    out = getattr(getattr(parent, "output", None), "dense", None)
    if out is None:
        raise InputError(f"Cannot find the output projection of layer {layer} in {loaded.label}.")
    return out


def _bert_style(mod, d_model: int) -> bool:
    """Separate query/key/value linears of d_model x d_model and no rotary embedding (not RoFormer's rotated q and k,
    SqueezeBERT's convolutions or ConvBERT's half-width heads)."""
    if hasattr(mod, "apply_rotary_position_embeddings"):
        return False
    weights = [getattr(getattr(mod, a, None), "weight", None) for a in ("query", "key", "value")]
    return all(w is not None and tuple(w.shape) == (d_model, d_model) for w in weights)


def projections(loaded: LoadedModel, layer: int) -> dict:
    """Weights and biases w_q, w_k, w_v, w_o / b_q, ... in (out, in) layout, float32, plus `causal`."""
    mod = loaded.attention_modules[layer]
    t = lambda x: None if x is None else x.detach().float().cpu().clone()  # noqa: E731
    if _bert_style(mod, loaded.d_model):
        out = output_projection(loaded, layer)
        p = dict(w_q=t(mod.query.weight), w_k=t(mod.key.weight), w_v=t(mod.value.weight), w_o=t(out.weight))
        p.update(b_q=t(mod.query.bias), b_k=t(mod.key.bias), b_v=t(mod.value.bias), b_o=t(out.bias))
        p["causal"] = bool(getattr(mod, "is_causal", False) or getattr(loaded.model.config, "is_decoder", False))
        return p
    if hasattr(mod, "c_attn") and hasattr(mod, "c_proj"):
        d = loaded.d_model
        w, b = t(mod.c_attn.weight), t(mod.c_attn.bias)  # Conv1D stores (in, out): y = x @ w + b, q|k|v along out
        p = dict(w_q=w[:, :d].T.clone(), w_k=w[:, d : 2 * d].T.clone(), w_v=w[:, 2 * d :].T.clone())
        p.update(
            b_q=b[:d], b_k=b[d : 2 * d], b_v=b[2 * d :], w_o=t(mod.c_proj.weight).T.clone(), b_o=t(mod.c_proj.bias)
        )
        p["causal"] = True
        return p
    raise InputError(
        f"Copying a layer of {loaded.model.config.model_type} is not supported: it uses rotary positions or a "
        "layout our module does not have. BERT-style and GPT-2 models are supported."
    )
