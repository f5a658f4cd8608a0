"""Pure-Python benches: trace overhead vs eager, our MultiHeadAttention vs torch, trace time/memory vs length.

Each bench returns a plain dict (JSON-ready) with Summaries as dicts and the ratios the targets are about.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from functools import lru_cache
from pathlib import Path

import numpy as np
import torch

from .stats import MB, Summary, compare, peak_growth, torch_threads

ROOT = Path(__file__).resolve().parents[1]


def app_threads() -> int:
    """The dashboard's torch thread count (attnviz.ui.setup): the numbers are for the setting users get."""
    return max(1, min(4, os.cpu_count() or 1))


@lru_cache(maxsize=1)
def models():
    """(attnviz LoadedModel, the same weights loaded again with eager attention)."""
    import attnviz
    from attnviz.models import bundled_model_path
    from transformers import AutoModel

    torch.set_num_threads(app_threads())
    lm = attnviz.load_model()
    eager = AutoModel.from_pretrained(
        bundled_model_path(),
        attn_implementation="eager",
        dtype=torch.float32,
        trust_remote_code=False,
        use_safetensors=True,
    ).eval()
    return lm, eager


def _eager_fn(lm, eager, text):
    def run():
        enc = lm.tokenizer(text, return_tensors="pt")
        with torch.inference_mode():
            return eager(**enc, output_attentions=True).attentions

    return run


def _summ(res: dict) -> dict:
    out = {k: v.to_dict() for k, v in res.items() if isinstance(v, Summary)}
    out["ratios"] = {k: v.to_dict() for k, v in res["ratios"].items()}
    return out


# --- 1. full trace vs eager output_attentions --------------------------------------------------------


def trace_overhead(n_tokens: int = 128, repeat: int = 30, warmup: int = 5) -> dict:
    """attnviz.trace (tokenize, forward with capture of all four stages, numpy trace) vs eager forward.

    The baseline is what a user would otherwise run: the tokenizer plus the eager model's forward with
    output_attentions=True (weights only, as torch tensors). Also timed, for the breakdown: the capturing
    forward alone, and eager plus the conversion of its weights to one numpy array.
    """
    import attnviz
    from attnviz import models as M

    from .text import make_text

    lm, eager = models()
    text = make_text(lm.tokenizer, n_tokens, seed=1)
    enc = M._encode(lm, text, None, None, None)
    eager_run = _eager_fn(lm, eager, text)
    tr = attnviz.trace(lm, text)
    ref = np.stack([a[0].numpy() for a in eager_run()])
    check = float(np.abs(tr.weights - ref).max())

    res = compare(
        {
            "eager output_attentions": eager_run,
            "attnviz.trace": lambda: attnviz.trace(lm, text),
            "capturing forward only": lambda: M._forward(lm, enc, M._Recorder()),
            "eager + weights to numpy": lambda: np.stack([a[0].numpy() for a in eager_run()]),
        },
        warmup=warmup,
        repeat=repeat,
    )
    out = _summ(res)
    with torch_threads(1):
        cpu = compare(
            {"eager output_attentions": eager_run, "attnviz.trace": lambda: attnviz.trace(lm, text)},
            warmup=warmup,
            repeat=repeat,
            clock=time.thread_time,
        )
    out["one_thread_cpu"] = _summ(cpu)
    out["ratio_one_thread_cpu"] = cpu["ratios"]["attnviz.trace"].median
    out.update(
        n_tokens=tr.n_tokens,
        shape=list(tr.weights.shape),
        max_abs_diff_weights_vs_eager=check,
        ratio_of_medians=res["attnviz.trace"].median / res["eager output_attentions"].median,
        ratio_of_mins=res["attnviz.trace"].min / res["eager output_attentions"].min,
        ratio=res["ratios"]["attnviz.trace"].median,
        target=1.15,
        repeat=repeat,
    )
    out["pass"] = out["ratio"] <= out["target"]
    return out


# --- 2. our MultiHeadAttention vs torch.nn.MultiheadAttention ------------------------------------------


def mha_pair(batch: int, n_tokens: int, d_model: int, n_head: int):
    """torch's module, an input, and two callables: torch with per-head weights, and ours with the same weights."""
    from attnviz import MultiHeadAttention

    torch.manual_seed(0)
    theirs = torch.nn.MultiheadAttention(d_model, n_head, batch_first=True).eval()
    ours = MultiHeadAttention.from_torch(theirs).eval()
    x = torch.randn(batch, n_tokens, d_model)

    def run_theirs():
        with torch.inference_mode():
            return theirs(x, x, x, need_weights=True, average_attn_weights=False)

    def run_ours():
        with torch.inference_mode():
            return ours(x)

    return theirs, x, run_theirs, run_ours


def mha_vs_torch(
    batch: int = 128, n_tokens: int = 64, d_model: int = 512, n_head: int = 8, repeat: int = 30, warmup: int = 5
) -> dict:
    """Seed 000's sizes. Both return per-head weights; same weights via MultiHeadAttention.from_torch."""

    torch.set_num_threads(app_threads())
    theirs, x, run_theirs, run_ours = mha_pair(batch, n_tokens, d_model, n_head)

    def run_theirs_no_weights():
        with torch.inference_mode():
            return theirs(x, x, x, need_weights=False)

    (o_t, w_t), (o_o, st) = run_theirs(), run_ours()
    out_diff = float((o_t - o_o).abs().max())
    w_diff = float((w_t - st.weights).abs().max())
    res = compare(
        {
            "torch.nn.MultiheadAttention (per-head weights)": run_theirs,
            "attnviz.MultiHeadAttention (all four stages)": run_ours,
            "torch.nn.MultiheadAttention need_weights=False": run_theirs_no_weights,
        },
        warmup=warmup,
        repeat=repeat,
    )
    out = _summ(res)
    name_o, name_t = "attnviz.MultiHeadAttention (all four stages)", "torch.nn.MultiheadAttention (per-head weights)"
    with torch_threads(1):
        cpu = compare({name_t: run_theirs, name_o: run_ours}, warmup=warmup, repeat=repeat, clock=time.thread_time)
    out["one_thread_cpu"] = _summ(cpu)
    out["ratio_one_thread_cpu"] = cpu["ratios"][name_o].median
    out.update(
        sizes=dict(batch=batch, n_tokens=n_tokens, d_model=d_model, n_head=n_head),
        max_abs_diff_output=out_diff,
        max_abs_diff_weights=w_diff,
        ratio_of_medians=res[name_o].median / res[name_t].median,
        ratio_of_mins=res[name_o].min / res[name_t].min,
        ratio=res["ratios"][name_o].median,
        target=1.25,
        repeat=repeat,
    )
    out["pass"] = out["ratio"] <= out["target"]
    return out


# --- 3. trace time and memory as the sentence grows ------------------------------------------------------


def _memory_child(n_tokens: int, what: str) -> dict:
    """Run in a fresh process: peak RSS growth of one trace (or one eager forward) of n_tokens tokens."""
    import attnviz

    from .text import make_text

    lm, eager = models()
    warm = make_text(lm.tokenizer, 16, seed=99)
    text = make_text(lm.tokenizer, n_tokens, seed=n_tokens)
    if what == "trace":
        run = lambda: attnviz.trace(lm, text)  # noqa: E731
        attnviz.trace(lm, warm)
    else:
        run = _eager_fn(lm, eager, text)
        _eager_fn(lm, eager, warm)()
    grew, result = peak_growth(run)
    kept = (
        sum(a.nbytes for a in (result.weights, result.scores, result.mask, result.bias) if a is not None)
        if what == "trace"
        else sum(a.numel() * a.element_size() for a in result)
    )
    return {"peak_growth": grew, "result_bytes": kept}


def _measure_memory(n_tokens: int, what: str) -> dict:
    env = dict(os.environ, HF_HUB_OFFLINE="1", PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    code = f"import json; from bench.core import _memory_child; print('RESULT', json.dumps(_memory_child({n_tokens}, {what!r})))"
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    raise RuntimeError(f"memory child failed for {n_tokens} tokens ({what}):\n{proc.stderr[-3000:]}")


def fit_quadratic(ns, ts) -> dict:
    """Least squares t = a + b*T + c*T^2 on the medians; the quadratic term overtakes the linear at T = b/c."""
    ns, ts = np.asarray(ns, float), np.asarray(ts, float)
    A = np.stack([np.ones_like(ns), ns, ns**2], axis=1)
    (a, b, c), *_ = np.linalg.lstsq(A, ts, rcond=None)
    crossover = float(b / c) if c > 0 and b > 0 else None
    share = [float(c * n * n / (a + b * n + c * n * n)) for n in ns]
    return dict(a=float(a), b=float(b), c=float(c), crossover_tokens=crossover, quadratic_share=share)


def scaling(sizes=(16, 64, 128, 256, 512), repeat: int = 15, warmup: int = 3, memory_sizes=None) -> dict:
    """Per size: attnviz.trace vs eager time (interleaved), trace array bytes, peak RSS growth (fresh process).

    memory_sizes: the sizes whose peak RSS is measured (each in two fresh processes); None = every size.
    """
    import attnviz

    from .text import make_text

    lm, eager = models()
    rows = []
    for n in sizes:
        text = make_text(lm.tokenizer, n, seed=n)
        res = compare(
            {"eager": _eager_fn(lm, eager, text), "trace": lambda: attnviz.trace(lm, text)},
            warmup=warmup,
            repeat=repeat,
        )
        with torch_threads(1):
            cpu = compare(
                {"eager": _eager_fn(lm, eager, text), "trace": lambda: attnviz.trace(lm, text)},
                warmup=1,
                repeat=max(3, repeat // 2),
                clock=time.thread_time,
            )
        tr = attnviz.trace(lm, text)
        row = dict(
            trace_cpu1=cpu["trace"].to_dict(),
            eager_cpu1=cpu["eager"].to_dict(),
            ratio_cpu1=cpu["ratios"]["trace"].to_dict(),
            n_tokens=n,
            trace=res["trace"].to_dict(),
            eager=res["eager"].to_dict(),
            ratio=res["ratios"]["trace"].to_dict(),
            trace_bytes=int(sum(a.nbytes for a in (tr.weights, tr.scores, tr.mask, tr.bias) if a is not None)),
        )
        if memory_sizes is None or n in memory_sizes:
            row["mem_trace"] = _measure_memory(n, "trace")
            row["mem_eager"] = _measure_memory(n, "eager")
        rows.append(row)
    ns = [r["n_tokens"] for r in rows]
    fit = fit_quadratic(ns, [r["trace"]["median"] for r in rows]) if len(rows) >= 3 else None
    fit_cpu1 = fit_quadratic(ns, [r["trace_cpu1"]["median"] for r in rows]) if len(rows) >= 3 else None
    return {"rows": rows, "fit": fit, "fit_cpu1": fit_cpu1, "MB": MB}
