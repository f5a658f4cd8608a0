"""The 32k promise on this machine: a layer of Llama-3-8B's shape traced at 32,768 tokens (group llama8b).

What a trace holds does not depend on the device, so it is measured here on a model with Llama-3-8B's layer shape
(hidden 4,096, 32 query heads, 8 key/value heads, head dim 128, intermediate 14,336; random weights in bfloat16, one
layer, a vocabulary of a thousand words so the embeddings stay small): the bytes one layer holds, measured and as the
shapes predict them, and so for 32 layers with and without values; the peak growth of the process's resident memory
while tracing; how the mask is kept; one column, the last 128-query window and one layer's Heads-page work (as the
llama group reads them); and the trace against the SDPA forward of the same model, one round on one thread by CPU time
(a forward takes minutes here). Its section of docs/benchmarks.md lies between markers of its own.
"""

from __future__ import annotations

import torch

import attnviz
from attnviz.hf import capacity
from attnviz.hf.capture import CAPTURE_NAME
from attnviz.trace.reads import held_bytes
from bench import traces
from bench.measure import interleaved, ms, ratio

NAME = "Llama-3-8B layer shape, 1 layer"
SHAPE = traces.LLAMA_8B | {"num_hidden_layers": 1, "vocab_size": 1000}
TOKENS = 32768
FULL = 32  # Llama-3-8B's layers: one layer's bytes times this is what the whole model's trace holds
ROW_ARRAYS = 3  # float32 [head, query] per layer: the softmax's two row normalisers, and what each head writes (values)


def run(name: str = NAME, shape: dict = SHAPE, tokens: int = TOKENS, rounds: int = 3, dtype=torch.bfloat16) -> dict:
    """The group: build the model, then `measure` it; the row as a dict (the trace itself is dropped)."""
    return measure(traces.llama_model(name, shape, dtype=dtype), tokens, rounds)[0]


def grown(fn):
    """(fn(), bytes by which the process's resident memory peaked above where it stood before the call): the kernel's
    high-water mark, reset first (Linux: /proc/self/clear_refs), so nothing is sampled and no peak is missed."""
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    before = _status("VmRSS")
    out = fn()
    return out, _status("VmHWM") - before


def _status(field: str) -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith(field + ":"))


def predicted(config, tokens: int, itemsize: int, values: bool) -> int:
    """Bytes one layer's record holds as the shapes predict them: q [head, T, d] and k [kv head, T, d] (and v, like k)
    in the model's dtype, key/value heads not expanded, and the float32 per-row arrays [head, T]."""
    n_head, n_kv, d = config.num_attention_heads, config.num_key_value_heads, config.head_dim
    vectors = (n_head + n_kv * (2 if values else 1)) * tokens * d * itemsize
    return vectors + (ROW_ARRAYS if values else ROW_ARRAYS - 1) * n_head * tokens * 4


def held(trace) -> dict:
    """One layer's bytes (the first), with and without its values (the same record less v and what each head
    writes), and its mask's structure and bytes."""
    record = trace.layers[0]
    values = () if record.values is None else (record.values.v, record.values.written)
    without = [t for t in record.tensors() if not any(t is v for v in values)]
    return {"bytes_layer": held_bytes(record.tensors()), "bytes_layer_no_values": held_bytes(without),
            "mask": record.mask.kind, "mask_bytes": record.mask.nbytes}  # fmt: skip


def reads(trace, layer: int = 0) -> dict:
    """What is timed on the trace, as the llama group reads it: one column (the weight every query gives token 0)
    and the last 128-query window, every head."""
    n, w = trace.n_tokens, traces.WINDOW
    last = (max(0, n - w), n)
    return {
        "column": lambda: trace.column(layer, key=0),
        "window": lambda: trace.stages(layer, queries=last, keys=last),
    }


def measure(loaded, tokens: int, rounds: int = 3) -> tuple[dict, object]:
    """(the row, the trace that was measured). The trace keeps its values (values=True), so both sizes are measured
    on one record; the bytes for 32 layers are one layer's times 32, and by default a trace leaves its values out
    past capacity.VALUES_BUDGET."""
    model, text = loaded.model, traces.sentence(tokens, seed=tokens, special=0)
    kept = {}

    def sdpa(text=text):
        model.set_attn_implementation("sdpa")
        with torch.inference_mode():
            model(**loaded.tokenizer(text, return_tensors="pt"))

    def trace(text=text):
        kept.clear()  # the last trace goes before this one is made
        model.set_attn_implementation(CAPTURE_NAME)
        kept["trace"], kept["growth"] = grown(lambda: attnviz.trace(loaded, text, values=True))

    short = traces.sentence(min(tokens, 256), special=0)
    sdpa(short), trace(short)  # first-call costs (kernels chosen, buffers) before the timed round
    t = interleaved({"trace": trace, "sdpa": sdpa}, rounds=1, warmup=0, one_thread=True)
    tr = kept["trace"]
    out = {"model": loaded.label, "tokens": tr.n_tokens, "layers": tr.n_layer, "rounds": rounds, "full_layers": FULL}
    out |= {"trace_cpu_s": t["trace"][0], "sdpa_cpu_s": t["sdpa"][0], "trace_vs_sdpa_cpu1": ratio(t, "trace", "sdpa")}
    out |= held(tr) | {"growth_bytes": kept["growth"], "values_budget": capacity.VALUES_BUDGET}
    itemsize = model.dtype.itemsize
    out |= {f"predicted_{k}": predicted(model.config, tr.n_tokens, itemsize, v) for k, v in (("layer", True),
            ("layer_no_values", False))}  # fmt: skip
    out |= {f"{k}_ms": ms(v) for k, v in interleaved(reads(tr), rounds, warmup=1).items()}
    page = interleaved({"p": lambda: traces.heads_page(tr, 0)}, rounds, warmup=0)["p"]
    return out | {"heads_page_ms": ms(page)}, tr
