"""Before/after of the core fixes, measured in the same run (interleaved) so machine load cancels out.

Each "before" swaps the replaced code back in for the duration of one call:
  fix 1 (attnviz/attention.py, softmax): the old softmax, verbatim, with its amax pass over every score;
  fix 2 (attnviz/models.py, capture): a recorder without preallocated arrays, which is exactly the old path
        (every layer's scores and weights kept as tensors, then np.stack-ed into [layer, head, q, k]).
"""

from __future__ import annotations

import contextlib
import sys
import time

import torch

from .stats import compare, torch_threads


def softmax_before_fix(x: torch.Tensor) -> torch.Tensor:
    """attnviz.attention.softmax up to commit 8d59142: an amax pass over every score on every call."""
    weights = torch.softmax(x, dim=-1)
    dead = torch.isneginf(x.amax(dim=-1, keepdim=True))
    return weights.masked_fill(dead, 0.0) if bool(dead.any()) else weights


def _recorder_before_fix():
    from attnviz import models

    class RecorderBeforeFix(models._Recorder):
        def __init__(self, *args, **kwargs):
            kwargs.pop("out", None)  # no preallocated arrays: per-layer tensors + np.stack, as before fix 2
            super().__init__(*args, **kwargs)

    return RecorderBeforeFix


@contextlib.contextmanager
def patched(module_name: str, attr: str, value):
    mod = sys.modules[module_name]
    old = getattr(mod, attr)
    setattr(mod, attr, value)
    try:
        yield
    finally:
        setattr(mod, attr, old)


def _with(fn, *patches):
    def run():
        with contextlib.ExitStack() as stack:
            for p in patches:
                stack.enter_context(patched(*p))
            return fn()

    return run


def fixes(
    mha_sizes: dict,
    n_tokens: int = 128,
    repeat: int = 60,
    warmup: int = 5,
    long_tokens: int | None = 512,
    long_repeat: int = 20,
) -> dict:
    """The two targets the fixes are about: our MultiHeadAttention vs torch, attnviz.trace vs eager."""
    import attnviz

    from . import core
    from .text import make_text

    old_softmax = ("attnviz.attention", "softmax", softmax_before_fix)
    old_recorder = ("attnviz.models", "_Recorder", _recorder_before_fix())

    torch.set_num_threads(core.app_threads())
    d, h, b, t = mha_sizes["d_model"], mha_sizes["n_head"], mha_sizes["batch"], mha_sizes["n_tokens"]
    _, _, run_theirs, run_ours = core.mha_pair(b, t, d, h)

    lm, eager = core.models()
    mha_fns = {"torch": run_theirs, "before": _with(run_ours, old_softmax), "after": run_ours}
    out = {"repeat": repeat, "n_tokens": n_tokens, "long_tokens": long_tokens}
    for suffix, threads, clock in (("", core.app_threads(), time.perf_counter), ("_cpu1", 1, time.thread_time)):
        with torch_threads(threads):
            out["mha_vs_torch" + suffix] = _pack(compare(mha_fns, warmup=warmup, repeat=repeat, clock=clock))
            for n, key, reps in (
                (n_tokens, "trace_vs_eager", repeat),
                (long_tokens, "trace_vs_eager_long", long_repeat),
            ):
                if not n:
                    continue
                text = make_text(lm.tokenizer, n, seed=1)
                run_trace = lambda text=text: attnviz.trace(lm, text)  # noqa: E731
                trace_fns = {
                    "eager": core._eager_fn(lm, eager, text),
                    "before": _with(run_trace, old_softmax, old_recorder),
                    "fix 1 only": _with(run_trace, old_recorder),
                    "after": run_trace,
                }
                out[key + suffix] = _pack(compare(trace_fns, warmup=warmup, repeat=reps, clock=clock))
    return out


def _pack(res: dict) -> dict:
    base = next(iter(res))
    out = {"baseline_ms": res[base].median * 1e3}
    for name, ratio in res["ratios"].items():
        out[name] = ratio.to_dict()
        out[f"{name}_ms"] = res[name].median * 1e3
    return out
