"""Where each family keeps the output projection W_O that mixes an attention layer's heads back into the residual
stream, found by name once at load: on the attention module itself (Llama o_proj, BART out_proj, GPT-2 c_proj, T5 o,
GPT-NeoX dense, DistilBERT out_lin, ModernBERT Wo) or, for BERT-style models, beside it (BertAttention's
output.dense next to the self-attention). A candidate counts only when its input is exactly the heads' values side
by side (head x value width): a family whose projection is found nowhere keeps its values but says it cannot size
what its heads write, never a guess.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..trace import output_norms

ON_MODULE = ("o_proj", "out_proj", "c_proj", "o", "wo", "Wo", "dense", "out_lin", "output_proj")
BESIDE = ("output.dense",)  # on the self-attention's parent (BERT, RoBERTa, ELECTRA...)


@dataclass(frozen=True, eq=False)
class OutputProjection:
    """The model's own output-projection weight (a reference, no copy) and its layout."""

    weight: torch.Tensor  # (out, in) as torch.nn.Linear keeps it, or (in, out) for Conv1D (inputs_first)
    inputs_first: bool = False

    def r_factors(self, n_head: int, device=None) -> torch.Tensor:
        """[head, d_value, d_value]: R of each head's slice of W_O, kept per weight (output_norms.r_factors)."""
        return output_norms.r_factors(self.weight, n_head, self.inputs_first, device)


def _as_projection(module, width: int) -> OutputProjection | None:
    """`module` as an output projection taking `width` inputs (head x value width), else None."""
    weight = getattr(module, "weight", None)
    if not isinstance(weight, torch.Tensor) or weight.dim() != 2:
        return None
    inputs_first = type(module).__name__ == "Conv1D"  # GPT-2 and friends keep (in, out)
    fits = weight.shape[0 if inputs_first else 1] == width
    return OutputProjection(weight, inputs_first) if fits else None


def find(model, attention, n_head: int, d_value: int) -> OutputProjection | None:
    """The output projection of the attention module `attention` (heads `n_head`, value width `d_value`), or None."""
    width = n_head * d_value
    for name in ON_MODULE:
        found = _as_projection(getattr(attention, name, None), width)
        if found is not None:
            return found
    path = next((n for n, m in model.named_modules() if m is attention), "")
    if "." not in path:
        return None
    parent = model.get_submodule(path.rsplit(".", 1)[0])
    for name in BESIDE:
        try:
            found = _as_projection(parent.get_submodule(name), width)
        except AttributeError:
            continue
        if found is not None:
            return found
    return None


def find_all(model, rec) -> dict:
    """{attention module: OutputProjection} for every module a probe's Recorder `rec` saw whose projection is known
    (its records give each module's head count, its value widths the width of each head's values)."""
    found = {}
    for module, record, width in zip(rec.modules, rec.layers, rec.value_widths):
        if module in found or width is None:
            continue
        proj = find(model, module, record.shape[0], width)
        if proj is not None:
            found[module] = proj
    return found
