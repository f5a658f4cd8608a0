"""Long texts on Llama shapes, random weights in bfloat16 (built from a LlamaConfig: nothing is downloaded).

attnviz.trace against the SDPA forward (and eager with output_attentions copied to the host, where its weights fit);
the bytes a trace holds; one column, one 128-query window and one layer's Heads-page work read from the trace.
`cpu` runs everywhere; `gpu` whenever a GPU is available (device="cpu" with a tiny shape checks its code path).
"""

from __future__ import annotations

import dataclasses
import os

import torch

import attnviz
from attnviz.hf.capture import CAPTURE_NAME
from attnviz.plots import heatmaps as hm
from bench.measure import interleaved, ms, one_thread_cpu, ratio

# fmt: off
LLAMA_1B = {"num_hidden_layers": 16, "hidden_size": 2048, "num_attention_heads": 32, "num_key_value_heads": 8,
            "head_dim": 64, "intermediate_size": 8192, "vocab_size": 128256, "max_position_embeddings": 131072}
LLAMA_8B = LLAMA_1B | {"num_hidden_layers": 32, "hidden_size": 4096, "head_dim": 128, "intermediate_size": 14336}
TINY = LLAMA_1B | {"num_hidden_layers": 4, "hidden_size": 256, "num_attention_heads": 8, "num_key_value_heads": 2,
                   "head_dim": 32, "intermediate_size": 512, "vocab_size": 1000}
# (name, shape, tokens, rounds): the long rows run once, each call already takes seconds to minutes
CPU = (("Llama-3.2-1B layer shape, 4 layers", LLAMA_1B | {"num_hidden_layers": 4}, (2048,), 3),
       ("tiny Llama (4 layers, 8 heads, 2 kv heads, width 256)", TINY, (16384,), 1))
GPU = (("Llama-3.2-1B shape", LLAMA_1B, (2048, 8192, 32768), 3), ("Llama-3-8B shape", LLAMA_8B, (8192, 32768), 3))
# fmt: on
WORDS = [f"w{i}" for i in range(8)]
WINDOW = 128


def cpu(models=CPU, warmup: int = 1) -> dict:
    return {"device": "CPU", "rows": [r for m in models for r in _rows(*m, device="cpu", warmup=warmup)]}


def gpu(models=GPU, warmup: int = 1, device: str = "cuda") -> dict:
    if device == "cuda" and not torch.cuda.is_available():
        return {"skipped": "no GPU on this machine (torch.cuda.is_available() is False)"}
    rows = [r for m in models for r in _rows(*m, device=device, warmup=warmup)]
    return {"device": torch.cuda.get_device_name(0) if device == "cuda" else device, "rows": rows}


def tokenizer():
    """Whitespace words w0..w7 as token ids 0..7, no special tokens: a text of n words is n tokens."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    backend = Tokenizer(models.WordLevel(vocab={w: i for i, w in enumerate(WORDS)}, unk_token="w0"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(
        tokenizer_object=backend, unk_token="w0", model_input_names=["input_ids", "attention_mask"]
    )


def _rows(name: str, shape: dict, sizes, rounds: int, device: str, warmup: int) -> list[dict]:
    from transformers import AutoModel, LlamaConfig

    torch.manual_seed(0)
    with torch.device(device):
        model = AutoModel.from_config(LlamaConfig(**shape), attn_implementation="sdpa", dtype=torch.bfloat16)
    loaded = attnviz.from_model(model, tokenizer(), name)
    rows = [{"model": name, **_row(loaded, n, rounds, warmup)} for n in sizes]
    del model, loaded
    if device == "cuda":
        torch.cuda.empty_cache()
    return rows


def heads_page(trace, layer: int, head: int = 0) -> None:
    """What the Heads page computes for one layer (app_pages/heads.py): every head in the first window, one head up
    close, and the layer's tiles of the pooled overview. A fresh record each call, so no cached window is reused."""
    one = dataclasses.replace(trace, layers=(trace.layers[layer],))
    hm.head_grid(one, 0), hm.head_detail(one, 0, head), hm.overview(one)


def _eager_fits(model, n: int) -> bool:
    """Eager's weights (bfloat16, every layer, on the device and copied to the host) in a quarter of the memory."""
    room = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    if model.device.type == "cuda":
        room = min(room, torch.cuda.get_device_properties(model.device).total_memory)
    return model.config.num_hidden_layers * model.config.num_attention_heads * n * n * 2 < room / 4


def _row(loaded, n: int, rounds: int, warmup: int) -> dict:
    model = loaded.model
    sync = torch.cuda.synchronize if model.device.type == "cuda" else (lambda: None)
    ids, text = torch.arange(n, device=model.device)[None] % len(WORDS), " ".join(WORDS[i % 8] for i in range(n))

    def forward(impl: str):
        model.set_attn_implementation(impl)
        with torch.inference_mode():
            out = model(input_ids=ids, output_attentions=impl == "eager")
            [a.cpu() for a in out.attentions or ()]  # what a viewer has to do with eager's weights
        sync()

    def trace():
        model.set_attn_implementation(CAPTURE_NAME)  # the seam attnviz.from_model chose
        out = attnviz.trace(loaded, text, max_tokens=n)
        sync()
        return out

    fns = {"sdpa": lambda: forward("sdpa"), "trace": trace}
    fns |= {"eager": lambda: forward("eager")} if _eager_fits(model, n) else {}
    warmup = warmup if rounds > 1 else 0  # a row timed once takes seconds to minutes a call: first-call costs vanish
    t = interleaved(fns, rounds, warmup)
    row = {"tokens": n, **{f"{k}_ms": ms(v) for k, v in t.items()}}
    row |= {f"{k}_vs_sdpa": ratio(t, k, "sdpa") for k in fns if k != "sdpa"}
    if model.device.type == "cpu" and rounds > 1:  # the work itself, which waiting for a core does not inflate
        row["trace_vs_sdpa_cpu1"] = ratio(
            one_thread_cpu({k: fns[k] for k in ("sdpa", "trace")}, rounds, 0), "trace", "sdpa"
        )
    tr, mid = trace(), loaded.n_layer // 2
    assert tr.n_tokens == n, (tr.n_tokens, n)
    reads = {
        "column": lambda: tr.column(mid, key=0),  # [head, query]: each row's softmax over all its keys
        "window": lambda: tr.stages(mid, queries=(n - WINDOW, n), keys=(n - WINDOW, n)),  # the last window
        "heads_page": lambda: heads_page(tr, mid),
    }
    t = interleaved(reads, rounds, warmup)
    return row | {f"{k}_ms": ms(v) for k, v in t.items()} | {"bytes": tr.nbytes, "layers": tr.n_layer}
