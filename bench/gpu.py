"""GPU, whenever one is available: a Llama-3.2-1B-shaped model with random weights in bfloat16. attnviz.trace and
the eager forward (output_attentions copied to the host) against the SDPA forward, 128 to 8,192 tokens; the bytes
a trace holds; what the Heads page needs for one layer (every head windowed to 128 tokens and pooled, one head in
full) computed on the device."""

from __future__ import annotations

import os

import torch

from bench.measure import interleaved, ms

# fmt: off
LLAMA_1B = {"num_hidden_layers": 16, "hidden_size": 2048, "num_attention_heads": 32, "num_key_value_heads": 8,
            "head_dim": 64, "intermediate_size": 8192, "vocab_size": 128256, "max_position_embeddings": 131072}
# fmt: on
WORDS = ["w0", "w1", "w2", "w3", "w4", "w5", "w6", "w7"]


def run(sizes=(128, 512, 2048, 4096, 8192), rounds: int = 5, warmup: int = 1, shape=LLAMA_1B, device="cuda") -> dict:
    """device="cpu" with a tiny shape only checks this code path on a machine without a GPU."""
    if device == "cuda" and not torch.cuda.is_available():
        return {"skipped": "no GPU on this machine (torch.cuda.is_available() is False)"}
    from transformers import AutoModel, LlamaConfig

    torch.manual_seed(0)
    with torch.device(device):
        model = AutoModel.from_config(LlamaConfig(**shape), attn_implementation="sdpa", dtype=torch.bfloat16).eval()
    rows = [_row(model, n, rounds, warmup) for n in sizes]
    name = torch.cuda.get_device_name(0) if device == "cuda" else device
    return {"device": name, "torch": torch.__version__, "rows": rows}


def _tokenizer():
    """Whitespace words w0..w7 as token ids 0..7: a text of n words is n tokens, whatever the model."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    backend = Tokenizer(models.WordLevel(vocab={w: i for i, w in enumerate(WORDS)}, unk_token="w0"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="w0")


def _trace_row(model, n: int, rounds: int, warmup: int) -> dict:
    """attnviz.trace on the device, the bytes it holds, and the Heads page's work for one layer."""
    import attnviz

    loaded = attnviz.from_model(model, _tokenizer(), "llama-1b-shaped")
    text = " ".join(WORDS[i % len(WORDS)] for i in range(n))
    sync = torch.cuda.synchronize if model.device.type == "cuda" else (lambda: None)
    tr = attnviz.trace(loaded, text, max_tokens=n)
    mid = tr.n_layer // 2
    page = lambda: (tr.stages(mid, queries=(0, 128)), tr.stages(mid, heads=0), pooled_layer(tr, mid), sync())  # noqa: E731
    t = interleaved(
        {"trace": lambda: (attnviz.trace(loaded, text, max_tokens=n), sync()), "page": page}, rounds, warmup
    )
    model.set_attn_implementation("sdpa")
    return {"trace_ms": ms(t["trace"]), "trace_bytes": tr.nbytes, "heads_page_layer_ms": ms(t["page"])}


def pooled_layer(trace, layer: int, tile: int = 24):
    from attnviz.analysis.pooling import pool

    return pool(trace.stages(layer, device=True).weights, tile, sum_keys=True).cpu()


def _forward(model, ids, impl: str):
    with torch.inference_mode():
        out = model(input_ids=ids, output_attentions=impl == "eager")
        host = [a.cpu() for a in out.attentions or ()]  # what a viewer has to do with eager's weights
    if ids.is_cuda:
        torch.cuda.synchronize()
    return host


def _time(model, ids, impl: str, rounds: int, warmup: int) -> float:
    model.set_attn_implementation(impl)
    return ms(interleaved({impl: lambda: _forward(model, ids, impl)}, rounds, warmup)[impl])


def _row(model, n: int, rounds: int, warmup: int) -> dict:
    cfg = model.config
    ids = torch.randint(cfg.vocab_size, (1, n), device=model.device)
    row = {"tokens": n, "sdpa_ms": _time(model, ids, "sdpa", rounds, warmup)}
    row |= _trace_row(model, n, rounds, warmup)
    row["trace_vs_sdpa"] = row["trace_ms"] / row["sdpa_ms"]
    weights = cfg.num_hidden_layers * cfg.num_attention_heads * n * n * 2  # bfloat16, on the device and the host
    room = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    if ids.is_cuda:
        room = min(room, torch.cuda.get_device_properties(ids.device).total_memory)
    if weights > room / 2:
        return {**row, "eager": f"not run: its weights alone are {weights / 2**30:.0f} GiB"}
    try:
        row["eager_ms"] = _time(model, ids, "eager", rounds, warmup)
    except torch.cuda.OutOfMemoryError:
        row["eager"] = "out of GPU memory"
    if ids.is_cuda:
        torch.cuda.empty_cache()
    return {**row, "eager_vs_sdpa": row["eager_ms"] / row["sdpa_ms"]} if "eager_ms" in row else row
