"""A head profile on a GPU against the SDPA forward over the same texts (group corpus_gpu), for the cost of a corpus.

The Llama-3-8B and Llama-3.2-1B shapes (random bfloat16 weights on the device, a word-level tokenizer: nothing
downloaded) over texts of `tokens` tokens each (512 by default, HeadVis's length): transformers' SDPA forward one text
a call and BATCH texts a call, and attnviz.profile as it runs (texts batched where a batch fits a window: at 512
tokens these models read one text a forward) without and with the head distances (4 seeded rows a text, its
default). Wall-clock seconds with the device synchronised after each call, interleaved rounds. From the per-text
times: the hours for 100,000 such texts on one GPU and on eight (Ray, one actor each, the model loaded once per
actor: docs/corpus.md, "Cost"). `python -m bench.corpus_gpu [tokens]` prints the rows as JSON.
"""

from __future__ import annotations

import time
import traceback

import torch

from attnviz.corpus import profile
from bench import traces
from bench.corpus import on_sdpa
from bench.measure import interleaved, ms, ratio

#: (name, shape, texts): the rows of a GPU run; a row the device cannot hold says why and the others still run
MODELS = (("Llama-3.2-1B shape", traces.LLAMA_1B, 16), ("Llama-3-8B shape", traces.LLAMA_8B, 16))
CORPUS = 100_000  # texts of the cost on paper
BATCH = 8  # texts a forward of the batched SDPA row (the profile's default batch)


def run(models=MODELS, tokens: int = 512, rounds: int = 2, warmup: int = 1, device: str = "cuda") -> dict:
    if device == "cuda" and not torch.cuda.is_available():
        return {"skipped": "no GPU on this machine (torch.cuda.is_available() is False)"}
    name = torch.cuda.get_device_name() if device == "cuda" else "CPU"
    return {"device": name, "rows": [_row_or_why(*m, tokens, rounds, warmup, device) for m in models]}


def _row_or_why(name: str, shape: dict, n_texts: int, tokens: int, rounds: int, warmup: int, device: str) -> dict:
    try:
        return row(name, shape, n_texts, tokens, rounds, warmup, device)
    except Exception as e:  # noqa: BLE001 - one row the device cannot run must not cost the others
        traceback.print_exc()
        return {"model": name, "tokens": tokens, "failed": f"{type(e).__name__}: {str(e)[:300]}"}
    finally:
        torch.cuda.empty_cache()  # nothing unless CUDA was used


def row(name: str, shape: dict, n_texts: int, tokens: int, rounds: int, warmup: int, device: str) -> dict:
    t0 = time.perf_counter()
    loaded = traces.llama_model(name, shape, device=device)
    built = time.perf_counter() - t0
    texts = [traces.sentence(tokens, seed=i, special=0) for i in range(n_texts)]
    model, sync = loaded.model, (torch.cuda.synchronize if device == "cuda" else lambda: None)

    def sdpa():
        with on_sdpa(model):
            for t in texts:
                model(**loaded.tokenizer(t, return_tensors="pt").to(device))
        sync()

    def synced(fn):
        return lambda: (fn(), sync())

    def sdpa_batched():  # beside it: what batching gives the forward itself (the profile batches short texts)
        with on_sdpa(model):
            for i in range(0, len(texts), BATCH):  # every text has `tokens` tokens: no padding
                model(**loaded.tokenizer(texts[i : i + BATCH], return_tensors="pt").to(device))
        sync()

    fns = {"sdpa": sdpa, "profile": synced(lambda: profile(loaded, texts, distances=False, max_tokens=tokens)),
           "profile_distances": synced(lambda: profile(loaded, texts, max_tokens=tokens)),
           "sdpa_batched": sdpa_batched}  # fmt: skip
    t = interleaved(fns, rounds, warmup)
    per_text = {k: ms(v) / n_texts for k, v in t.items()}
    hours = {k: v * CORPUS / 3.6e6 for k, v in per_text.items()}
    return {"model": name, "texts": n_texts, "tokens": tokens, "build_s": round(built, 1),
            **{f"{k}_ms_per_text": round(v, 2) for k, v in per_text.items()},
            "profile_vs_sdpa": ratio(t, "profile", "sdpa"),
            "profile_distances_vs_sdpa": ratio(t, "profile_distances", "sdpa"),
            "profile_vs_sdpa_batched": ratio(t, "profile", "sdpa_batched"),
            **{f"{k}_h_100k_1gpu": round(v, 2) for k, v in hours.items()},
            **{f"{k}_h_100k_8gpu": round(v / 8, 2) for k, v in hours.items()},
            "peak_gb": round(torch.cuda.max_memory_allocated() / 2**30, 2) if device == "cuda" else None}  # fmt: skip


if __name__ == "__main__":
    import json
    import sys

    print(json.dumps(run(tokens=int(sys.argv[1]) if len(sys.argv) > 1 else 512), indent=1))
