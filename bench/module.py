"""attnviz.MultiHeadAttention against torch.nn.MultiheadAttention with the same weights, both returning per-head
weights (torch: need_weights=True, average_attn_weights=False)."""

from __future__ import annotations

import torch

import attnviz
from bench.measure import interleaved, ms, ratio


def mha(batch: int = 128, tokens: int = 64, d_model: int = 512, heads: int = 8, rounds: int = 10, warmup: int = 2):
    torch.manual_seed(0)
    theirs = torch.nn.MultiheadAttention(d_model, heads, batch_first=True).eval()
    ours = attnviz.MultiHeadAttention.from_torch(theirs).eval()
    x = torch.randn(batch, tokens, d_model)
    fns = {
        "torch": torch.inference_mode()(lambda: theirs(x, x, x, need_weights=True, average_attn_weights=False)),
        "attnviz": torch.inference_mode()(lambda: ours(x)),
    }
    diff = float((fns["torch"]()[0] - fns["attnviz"]()[0]).abs().max())
    t, c = interleaved(fns, rounds, warmup), interleaved(fns, rounds, warmup, one_thread=True)
    shape = {"batch": batch, "tokens": tokens, "d_model": d_model, "heads": heads, "rounds": rounds, "max_diff": diff}
    out = {"torch_ms": ms(t["torch"]), "attnviz_ms": ms(t["attnviz"]), "ratio": ratio(t, "attnviz", "torch")}
    return shape | out | {"ratio_cpu1": ratio(c, "attnviz", "torch")}
