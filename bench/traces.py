"""attnviz.trace against the forwards it replaces, and what a page reads from a trace.

Per row: the SDPA forward (the fastest honest forward, no weights), attnviz.trace and, where its weights fit, eager
with output_attentions copied to the host, tokenizer included in all three, timed in the same rounds; the bytes a
trace holds; on its middle layer one column, the last 128-query window and the Heads page's work for one layer.
`bundled`: the bundled model on CPU. `llama`: Llama shapes with random weights in bfloat16, built from a LlamaConfig
(nothing is downloaded), on CPU (group llama) or on a GPU whenever one is available (group gpu, device="cuda").
"""

from __future__ import annotations

import dataclasses
import os
import random

import torch

import attnviz
from attnviz.analysis.values import value_norms
from attnviz.hf.capture import CAPTURE_NAME
from attnviz.plots import heatmaps as hm
from bench.measure import interleaved, ms, ratio

# fmt: off
LLAMA_1B = {"num_hidden_layers": 16, "hidden_size": 2048, "num_attention_heads": 32, "num_key_value_heads": 8,
            "head_dim": 64, "intermediate_size": 8192, "vocab_size": 128256, "max_position_embeddings": 131072}
LLAMA_8B = LLAMA_1B | {"num_hidden_layers": 32, "hidden_size": 4096, "head_dim": 128, "intermediate_size": 14336}
TINY = LLAMA_1B | {"num_hidden_layers": 4, "hidden_size": 256, "num_attention_heads": 8, "num_key_value_heads": 2,
                   "head_dim": 32, "intermediate_size": 512, "vocab_size": 1000}
# (name, shape, tokens, rounds): a row timed once takes seconds to minutes a call
CPU = (("Llama-3.2-1B layer shape, 4 layers", LLAMA_1B | {"num_hidden_layers": 4}, (2048,), 3),
       ("tiny Llama (4 layers, 8 heads, 2 kv heads, width 256)", TINY, (16384,), 1))
GPU = (("Llama-3.2-1B shape", LLAMA_1B, (2048, 8192, 32768), 3), ("Llama-3-8B shape", LLAMA_8B, (8192, 32768), 3))
WORDS = """the cat sat on mat a dog ran away because it was tired and then slept near warm fire while rain fell outside
old house by river where children played games every summer before school started again""".split()
# fmt: on
WINDOW = 128


def sentence(n_tokens: int, seed: int = 0, special: int = 2) -> str:
    """A text of n_tokens tokens: every word of WORDS is one token of the bundled tokenizer, which adds [CLS] and
    [SEP] (special=2), and of the Llama rows' word-level tokenizer, which adds none (special=0)."""
    return " ".join(random.Random(seed).choice(WORDS) for _ in range(n_tokens - special))


def bundled(sizes=(32, 128, 512), rounds: int = 15, warmup: int = 2) -> dict:
    return {"device": "CPU", "rows": rows(attnviz.load_model(), "bundled all-MiniLM-L6-v2", sizes, rounds, warmup)}


def llama(models=CPU, warmup: int = 1, device: str = "cpu") -> dict:
    if device == "cuda" and not torch.cuda.is_available():
        return {"skipped": "no GPU on this machine (torch.cuda.is_available() is False)"}
    found = [r for m in models for r in _llama_rows(*m, device=device, warmup=warmup)]
    return {"device": torch.cuda.get_device_name(0) if device == "cuda" else device.upper(), "rows": found}


def llama_model(name: str, shape: dict, device: str = "cpu", dtype=torch.bfloat16):
    """A LoadedModel (attnviz.from_model) of a Llama with `shape` and random weights, and a word-level tokenizer in
    which every word of WORDS is one token (no special tokens)."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import AutoModel, LlamaConfig, PreTrainedTokenizerFast

    words = Tokenizer(models.WordLevel(vocab={w: i for i, w in enumerate(WORDS)}, unk_token="the"))
    words.pre_tokenizer = pre_tokenizers.WhitespaceSplit()  # a text of n words is n tokens, no special tokens
    tok = PreTrainedTokenizerFast(tokenizer_object=words, model_input_names=["input_ids", "attention_mask"])
    torch.manual_seed(0)
    with torch.device(device):
        model = AutoModel.from_config(LlamaConfig(**shape), attn_implementation="sdpa", dtype=dtype)
    return attnviz.from_model(model, tok, name)


def _llama_rows(name: str, shape: dict, sizes, rounds: int, device: str, warmup: int) -> list[dict]:
    loaded = llama_model(name, shape, device)
    found = rows(loaded, name, sizes, rounds, warmup, special=0)
    del loaded  # the model with it, before the next row's
    torch.cuda.empty_cache()  # nothing unless CUDA was used
    return found


def rows(loaded, name: str, sizes, rounds: int, warmup: int, special: int = 2) -> list[dict]:
    return [_row_or_why(loaded, name, n, rounds, warmup, special) for n in sizes]


def _row_or_why(loaded, name: str, n: int, rounds: int, warmup: int, special: int) -> dict:
    """A row, or why it could not be measured (an attnviz error, such as running out of GPU memory): one row that
    fails must not cost the others."""
    try:
        return row(loaded, name, sentence(n, seed=n, special=special), rounds, warmup)
    except attnviz.AttnvizError as e:
        torch.cuda.empty_cache()  # nothing unless CUDA was used
        return {"model": name, "tokens": n, "failed": f"{type(e).__name__}: {e}"}


def heads_page(trace, layer: int, head: int = 0) -> None:
    """What the Heads page computes for one layer (app_pages/heads.py): every head in the first window, one head up
    close, and the layer's tiles of the pooled overview. A fresh record each call, so no cached window is reused."""
    one = dataclasses.replace(trace, layers=(trace.layers[layer],))
    hm.head_grid(one, 0), hm.head_detail(one, 0, head), hm.overview(one)


def row(loaded, name: str, text: str, rounds: int, warmup: int) -> dict:
    model = loaded.model
    sync = torch.cuda.synchronize if model.device.type == "cuda" else (lambda: None)

    def forward(impl: str):
        model.set_attn_implementation(impl)
        with torch.inference_mode():
            inputs = {k: v.to(model.device) for k, v in loaded.tokenizer(text, return_tensors="pt").items()}
            out = model(**inputs, output_attentions=impl == "eager")
            [a.cpu() for a in out.attentions or ()]  # what a viewer has to do with eager's weights
        sync()

    def trace():  # a model from load_model runs the seam it chose at load; from_model's switches per forward
        model.set_attn_implementation(CAPTURE_NAME)
        out = attnviz.trace(loaded, text)
        sync()
        return out

    tr, mid = trace(), loaded.n_layer // 2
    room = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")  # eager only where its weights take under a
    if model.device.type == "cuda":  # quarter of the memory where the model lives: it must not endanger the run
        room = min(room, torch.cuda.get_device_properties(model.device).total_memory)
    eager = model.config.num_hidden_layers * tr.n_head * tr.n_tokens**2 * model.dtype.itemsize
    n, refs = tr.n_tokens, ["sdpa", "eager"] if eager < room / 4 else ["sdpa"]
    fns = {"trace": trace} | {k: lambda k=k: forward(k) for k in refs}
    warmup = warmup if rounds > 1 else 0  # a row timed once takes seconds a call: first-call costs vanish
    t = interleaved(fns, rounds, warmup)
    cpu = model.device.type == "cpu" and rounds > 1  # CPU time on one thread: waiting for a core does not count
    c = interleaved(fns, rounds, warmup=0, one_thread=True) if cpu else None  # warm from the rounds above
    out = {"model": name, "tokens": n, "layers": tr.n_layer, "bytes": tr.nbytes, "rounds": rounds}
    out |= {f"{k}_ms": ms(v) for k, v in t.items()} | {f"trace_vs_{k}": ratio(t, "trace", k) for k in refs}
    out |= {f"trace_vs_{k}_cpu1": ratio(c, "trace", k) for k in refs} if c else {}
    last = (max(0, n - WINDOW), n)  # the last window; a column is [head, query], each row's softmax over all keys
    reads = {"column": lambda: tr.column(mid, key=0), "window": lambda: tr.stages(mid, queries=last, keys=last)}
    out |= {f"{k}_ms": ms(v) for k, v in interleaved(reads, rounds, warmup).items()}
    if tr.has("values") and tr.n_head * n * n * 4 * 5 < room / 4:  # a layer's four stages, or its value norms, whole
        layer = {"norms": lambda: value_norms(tr, mid), "stages": lambda: tr.stages(mid)}  # issue 20: norms <= stages
        out["norms_vs_stages"] = ratio(interleaved(layer, rounds, warmup), "norms", "stages")
    try:
        return out | {"heads_page_ms": ms(interleaved({"p": lambda: heads_page(tr, mid)}, rounds, warmup)["p"])}
    except torch.cuda.OutOfMemoryError:
        return out | {"heads_page": "not run: out of GPU memory"}
