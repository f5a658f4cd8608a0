"""GPU, whenever one is available: a Llama-3.2-1B-shaped model with random weights in bfloat16, the SDPA
forward against the eager forward with output_attentions copied to the host, 128 to 8,192 tokens."""

from __future__ import annotations

import os

import torch

from bench.measure import interleaved, ms

# fmt: off
LLAMA_1B = {"num_hidden_layers": 16, "hidden_size": 2048, "num_attention_heads": 32, "num_key_value_heads": 8,
            "head_dim": 64, "intermediate_size": 8192, "vocab_size": 128256, "max_position_embeddings": 131072}
# fmt: on
NO_TRACE = "attnviz.trace not run: attnviz.load_model() loads float32 on the CPU and has no device option yet."


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
    return {"device": name, "torch": torch.__version__, "rows": rows, "note": NO_TRACE}


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
