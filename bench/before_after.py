"""Before/after of the core fixes, measured in the same run (interleaved) so machine load cancels out.

Each "before" is the replaced code, verbatim, swapped in for the duration of one call.
"""

from __future__ import annotations

import contextlib
import sys

import torch

from .stats import compare


def softmax_before_fix(x: torch.Tensor) -> torch.Tensor:
    """attnviz.attention.softmax up to commit 8d59142: an amax pass over every score on every call."""
    weights = torch.softmax(x, dim=-1)
    dead = torch.isneginf(x.amax(dim=-1, keepdim=True))
    return weights.masked_fill(dead, 0.0) if bool(dead.any()) else weights


@contextlib.contextmanager
def patched(module_name: str, attr: str, value):
    mod = sys.modules[module_name]
    old = getattr(mod, attr)
    setattr(mod, attr, value)
    try:
        yield
    finally:
        setattr(mod, attr, old)


def _before(fn):
    def run():
        with patched("attnviz.attention", "softmax", softmax_before_fix):
            return fn()

    return run


def softmax_fix(mha_sizes: dict, n_tokens: int = 128, repeat: int = 30, warmup: int = 5) -> dict:
    """The two targets the fix is about: our MultiHeadAttention vs torch, attnviz.trace vs eager."""
    import attnviz

    from . import core
    from .text import make_text

    torch.set_num_threads(core.app_threads())
    torch.manual_seed(0)
    d, h, b, t = mha_sizes["d_model"], mha_sizes["n_head"], mha_sizes["batch"], mha_sizes["n_tokens"]
    theirs = torch.nn.MultiheadAttention(d, h, batch_first=True).eval()
    ours = attnviz.MultiHeadAttention.from_torch(theirs).eval()
    x = torch.randn(b, t, d)

    def run_theirs():
        with torch.inference_mode():
            return theirs(x, x, x, need_weights=True, average_attn_weights=False)

    def run_ours():
        with torch.inference_mode():
            return ours(x)

    mha = compare({"torch": run_theirs, "before": _before(run_ours), "after": run_ours}, warmup=warmup, repeat=repeat)

    lm, eager = core.models()
    text = make_text(lm.tokenizer, n_tokens, seed=1)
    run_eager = core._eager_fn(lm, eager, text)
    run_trace = lambda: attnviz.trace(lm, text)  # noqa: E731
    tr = compare({"eager": run_eager, "before": _before(run_trace), "after": run_trace}, warmup=warmup, repeat=repeat)

    def pack(res):
        return {
            "before": res["ratios"]["before"].to_dict(),
            "after": res["ratios"]["after"].to_dict(),
            "before_ms": res["before"].median * 1e3,
            "after_ms": res["after"].median * 1e3,
            "baseline_ms": res[next(iter(res))].median * 1e3,
        }

    return {"mha_vs_torch": pack(mha), "trace_vs_eager": pack(tr), "repeat": repeat, "n_tokens": n_tokens}
