"""A head profile against the plain SDPA forward over the same texts, and its held memory at two corpus sizes.

cost: the bundled model over N texts of the default corpus: transformers' SDPA forward one text a forward (`sdpa`,
tokenizer included; texts cut where the profile cuts them) and the same forward over the very batches the profile reads
(`sdpa_batched`: attnviz.corpus.batch.plan within each shard, right-padded; the fair baseline of a batched profile),
attnviz.corpus.profile without and with the head distances (by default over 4 seeded rows a text), and the profile one
text a forward (`profile_one_text`, batch=1: the code before batching); one thread, CPU time, interleaved rounds.
cost_wide: the same on 4 layers of the Llama-3.2-1B shape at 512 tokens (the ratio falls as the model widens);
cost_deep: on all 16 of its layers (a profile's forward ends after the last attention call, which saves most of one
layer: 4 layers overstate that).
The goal, at most 1.25x (docs/corpus.md, "Where the goal stands"): with the sums in C (attnviz.corpus.native), met by
cost_deep (1.15x; 1.12x with the head distances), cost_short (1.19x; 1.22-1.25x) and cost_120 (1.19-1.25x; with the
distances 1.28-1.29x, not); not by cost_512 (1.56x), the bundled 384-wide model made to read ~300 tokens, whose cells per forward FLOP are
11 times the 1B shape's (docs/corpus.md, "Why 1.25x is out of reach for the bundled model").
finder: the Corpus page's head finder for 32 x 32 heads.
side_by_side (BENCH_BASELINE=/path/to/another/checkout python -m bench.corpus): every cost row for that checkout and
this one, in fresh processes alternating baseline, branch for each row, each timing its own SDPA forward beside its
profile (one thread, CPU time), so both ratios of a row come from one run under the same load.
memory: the peak resident memory a fresh process adds (after a first profile of two shards) while profiling 1,000 and
then 10,000 short texts (a tiny random Llama: the model does not matter, the corpus size does), over the first and
the last ~1,000 texts of each run, glibc's mmap threshold fixed at a page (see memory()); the goal is growth within
10% of each other; memory(leak=True) must fail it.
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import subprocess
import sys

import numpy as np
import torch

import attnviz
from attnviz.corpus import batch, open_corpus, profile
from attnviz.corpus.rows import cells_on
from attnviz.corpus.state import Settings
from attnviz.hf.capture import CAPTURE_NAME
from attnviz.hf.encode import encode, token_limit
from attnviz.hf.probe import model_inputs
from bench.measure import ROOT, interleaved, load, ms, ratio


@contextlib.contextmanager
def on_sdpa(model):
    """transformers' own SDPA inside the block (inference mode), not attnviz's attention function that a loaded model
    runs outside a trace too (it builds an explicit mask); attnviz's again after."""
    model.set_attn_implementation("sdpa")
    try:
        with torch.inference_mode():
            yield
    finally:
        model.set_attn_implementation(CAPTURE_NAME)


def like_batched(loaded, texts: list, max_tokens: int):
    """The forward the goal compares a batched profile with: the same batches as the profile reads (attnviz.corpus.batch
    .plan within each shard: the same texts together, the same right padding), transformers' SDPA."""
    s, limit = Settings(), token_limit(loaded.max_tokens, max_tokens)
    per_cell, out = loaded.n_layer * loaded.n_head, []
    for start in range(0, len(texts), s.shard_size):
        encoded = [encode(loaded.tokenizer, t, None, limit) for t in texts[start : start + s.shard_size]]
        lengths = np.array([len(e.ids) for e in encoded])
        for group in batch.plan(
            lengths, list(range(len(encoded))), s.batch, s.batch_tokens, cells_on(loaded.device), per_cell
        ):
            out.append(
                model_inputs(loaded, batch.padded(loaded.tokenizer, [encoded[g] for g in group], max(lengths[group])))
            )
    return out


def cost(n_texts: int = 64, rounds: int = 3, warmup: int = 1, join: int = 1, max_tokens: int = 128) -> dict:
    """join: lines of the default corpus per text (1: its short texts, ~15 tokens; 8: ~120 tokens); max_tokens: where
    the profile cuts a text (its default, 128) and so the SDPA forward too. Baselines: `sdpa`, one text a forward;
    `sdpa_batched`, the batches the profile reads (`like_batched`), the fair baseline of a batched profile; the profile
    one text a forward (batch=1, as before batching) beside the batched one."""
    loaded = attnviz.load_model()
    lines = [t for _, t, _ in open_corpus().texts(0, n_texts * join)]
    texts = [" ".join(lines[i : i + join]) for i in range(0, len(lines), join)]

    def encode_one(x):  # cut where the profile cuts its texts
        return loaded.tokenizer(x, return_tensors="pt", truncation=True, max_length=max_tokens)

    def sdpa():
        with on_sdpa(loaded.model):
            for t in texts:
                loaded.model(**encode_one(t))

    def sdpa_batched():  # tokenized as the profile tokenizes (a text at a time), then the same padded batches
        with on_sdpa(loaded.model):
            for inputs in like_batched(loaded, texts, max_tokens):
                loaded.model(**inputs)

    fns = {"sdpa": sdpa, "sdpa_batched": sdpa_batched,
           "profile": lambda: profile(loaded, texts, distances=False, max_tokens=max_tokens),
           "profile_distances": lambda: profile(loaded, texts, max_tokens=max_tokens),
           "profile_one_text": lambda: profile(loaded, texts, distances=False, max_tokens=max_tokens, batch=1)}  # fmt: skip
    t = interleaved(fns, rounds, warmup, one_thread=True)
    tokens = sum(encode_one(x)["input_ids"].shape[1] for x in texts)
    return {"texts": n_texts, "tokens": tokens, "max_tokens": max_tokens, "load": load(),
            **{f"{k}_ms": ms(v) for k, v in t.items()},
            "profile_vs_sdpa_batched": ratio(t, "profile", "sdpa_batched"),
            "profile_distances_vs_sdpa_batched": ratio(t, "profile_distances", "sdpa_batched"),
            "profile_vs_sdpa": ratio(t, "profile", "sdpa"),
            "profile_distances_vs_sdpa": ratio(t, "profile_distances", "sdpa"),
            "profile_one_text_vs_sdpa": ratio(t, "profile_one_text", "sdpa"),
            "sdpa_batched_vs_sdpa": ratio(t, "sdpa_batched", "sdpa")}  # fmt: skip


def cost_wide(n_texts: int = 6, rounds: int = 2, warmup: int = 1, tokens: int = 512, layers: int = 4) -> dict:
    """The same comparison on a wide model: `layers` layers of the Llama-3.2-1B shape (width 2,048, 32 query heads, 8
    key/value heads; random bfloat16 weights, nothing downloaded) over texts of `tokens` tokens, HeadVis's length.
    The profile's own work grows with the cells (heads x tokens^2), the forward mostly with the width: the bundled
    model (width 384) is the worst case for the ratio. A profile's forward ends after the last attention call, which
    saves most of one layer of `layers`: 4 layers (cost_wide) overstate that, all 16 of the real model (cost_deep,
    ~2 minutes of one thread a tree) do not."""
    from bench import traces

    name = f"Llama-3.2-1B layer shape, {layers} layers"
    loaded = traces.llama_model(name, traces.LLAMA_1B | {"num_hidden_layers": layers})
    texts = [traces.sentence(tokens, seed=i, special=0) for i in range(n_texts)]
    model = loaded.model

    def sdpa():
        with on_sdpa(model):
            for t in texts:
                model(**loaded.tokenizer(t, return_tensors="pt"))

    fns = {"sdpa": sdpa, "profile": lambda: profile(loaded, texts, distances=False, max_tokens=tokens),
           "profile_distances": lambda: profile(loaded, texts, max_tokens=tokens)}  # fmt: skip
    t = interleaved(fns, rounds, warmup, one_thread=True)
    return {"model": loaded.label, "texts": n_texts, "tokens": n_texts * tokens,
            **{f"{k}_ms": ms(v) for k, v in t.items()}, "profile_vs_sdpa": ratio(t, "profile", "sdpa"),
            "profile_distances_vs_sdpa": ratio(t, "profile_distances", "sdpa")}  # fmt: skip


CHILD = """
import ctypes, json, resource, sys
ctypes.CDLL("libc.so.6").mallopt(-3, 4096)  # M_MMAP_THRESHOLD fixed at a page: see memory()
sys.path.insert(0, {root!r})
import torch
torch.set_num_threads(1)
from transformers import AutoModel, LlamaConfig
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast
import attnviz
from attnviz.corpus import profile
from bench.traces import TINY, WORDS, sentence
words = Tokenizer(models.WordLevel(vocab={{w: i for i, w in enumerate(WORDS)}}, unk_token="the"))
words.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
tok = PreTrainedTokenizerFast(tokenizer_object=words, model_input_names=["input_ids", "attention_mask"])
torch.manual_seed(0)
shape = TINY | {{"num_hidden_layers": 2, "hidden_size": 64, "head_dim": 8, "intermediate_size": 128}}
model = AutoModel.from_config(LlamaConfig(**shape), attn_implementation="sdpa")
loaded = attnviz.from_model(model, tok, "tiny Llama")
texts = [sentence(8 + i % 24, seed=i, special=0) for i in range({n})]
profile(loaded, texts[:128])  # two whole shards: every shape of batch a shard makes, before the peak is read
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
def peak_kb():  # the peak resident size since the last reset (VmHWM)
    return next(int(x.split()[1]) for x in open("/proc/self/status") if x.startswith("VmHWM:"))
def reset():  # the peak resident size set back to the resident size now (Linux: clear_refs 5)
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
held, peaks = [], {{}}  # leak=True: a tensor of 1 KB held per text profiled, the leak the bench must see
def stretch(done, total, *_):  # after every shard
    if {leak}:
        held.extend(torch.zeros(256) for _ in range(done - len(held)))
    if "first" not in peaks and done >= {window}:
        peaks["first"] = peak_kb()  # the first {window} texts (and the rest of their last shard)
    if "first" in peaks and done <= total - {window}:
        reset()  # the last reset starts the last stretch: {window} texts or a shard's more, and the end
reset()
profile(loaded, texts, progress=stretch)
last = peak_kb()
first = peaks.get("first", last)
print(json.dumps({{"before_kb": before, "peak_kb": max(first, last), "first_kb": first, "last_kb": last}}))
"""


def memory(sizes=(1_000, 10_000), leak: bool = False) -> dict:
    """The peak resident memory a profile of 1,000 and of 10,000 texts adds, each in a fresh process, after a first
    profile of two shards: the highest of the peak over its first sizes[0] texts and the peak over its last sizes[0]
    texts and the end (examples' texts, query-key sample, distances), each read as VmHWM after a reset (clear_refs 5) at
    a shard's end. A memory held across texts peaks in the last stretch, one that grows with the corpus as it starts (a
    corpus read whole, say) in the first; both runs are judged on stretches of as many texts, because the heap's layout
    makes each shard's transient peak vary by ~0.5 MB (glibc's in-use bytes, Python's objects and the resident memory
    between shards flat), and the peak of a whole run is the highest of 16 such draws at 1,000 texts and of 157 at
    10,000: read over whole runs, the larger run read 0.2-1.1 MB more with nothing held to explain it (what is left:
    docs/corpus.md, "Held memory"). glibc's mmap threshold is fixed at a page (4 KiB, mallopt): left dynamic, it rises
    to the largest block freed, and the heap's high-water mark then creeps for thousands of texts; at a page, every
    block from a page up is mapped and unmapped on its own, so what the peak reads is the pages in use, not the heap's
    holes (at 128 KiB the last stretch of a 10,000-text run read 0.4-0.6 MB over its first, at a page 0.2-0.4).
    leak=True holds 1 KB per text profiled (a list of tensors), the growth the bench exists to see: its ratio must then
    fail."""
    out, stretches = {}, {}
    for n in sizes:
        code = CHILD.format(root=str(ROOT), n=n, leak=bool(leak), window=sizes[0])
        run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
        got = json.loads(run.stdout.strip().splitlines()[-1])
        out[n] = (got["peak_kb"] - got["before_kb"]) / 1024
        stretches[n] = [round((got[k] - got["before_kb"]) / 1024, 1) for k in ("first_kb", "last_kb")]
    small, large = out[sizes[0]], out[sizes[1]]
    return (
        {f"growth_mb_{n}": round(v, 1) for n, v in out.items()}
        | {f"first_last_mb_{n}": v for n, v in stretches.items()}
        | {"growth_ratio": round((large + 1) / (small + 1), 3)}
    )  # +1 MB: a growth of 0 against 0 is no growth


def finder(n: int = 32, rounds: int = 5) -> dict:
    """The Corpus page's head finder for an n x n-head profile (synthetic statistics): the figure's build and the
    head map's classical MDS, CPU milliseconds (Plotly's draw in Chromium is measured apart: docs/corpus.md)."""
    import time

    import numpy as np

    from attnviz.corpus.examples import examples_from_rows
    from attnviz.corpus.maps import classical_mds
    from attnviz.corpus.store import HeadProfile
    from attnviz.plots.corpus import head_finder

    rng = np.random.default_rng(0)
    stats = {k: rng.random((n, n)) for k in ("entropy", "sink", "previous", "distance")}
    prof = HeadProfile(stats, np.zeros((n, n, 20), np.int64), None, examples_from_rows([]), {}, {"kv_groups": 4})
    t = time.process_time()
    for _ in range(rounds):
        head_finder(prof, "entropy", "sink", "kv_group", (1, 1))
    build = (time.process_time() - t) / rounds
    d = rng.random((n * n, n * n))
    t = time.process_time()
    classical_mds((d + d.T) / 2)
    return {
        "heads": n * n,
        "finder_build_ms": round(1000 * build, 1),
        "mds_ms": round(1000 * (time.process_time() - t)),
    }


def corpus(n_texts: int = 32, rounds: int = 3, warmup: int = 1, sizes=(1_000, 10_000)) -> dict:
    return {"finder": finder(), "cost_short": cost(n_texts, rounds, warmup), "cost_120": cost(n_texts, rounds, warmup, join=8),
            "cost_512": cost(n_texts // 2, rounds, warmup, join=24, max_tokens=512), "cost_wide": cost_wide(),
            "cost_deep": cost_wide(3, 1, layers=16),
            "memory": memory(sizes), "peak_rss_mb":
            resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}  # fmt: skip


#: The cost rows (the goal's: profile vs the SDPA forward), as corpus() runs them: name -> (function, kwargs).
ROWS = {"cost_short": ("cost", {"n_texts": 32}), "cost_120": ("cost", {"n_texts": 32, "join": 8}),
        "cost_512": ("cost", {"n_texts": 16, "join": 24, "max_tokens": 512}), "cost_wide": ("cost_wide", {}),
        "cost_deep": ("cost_wide", {"layers": 16, "n_texts": 3, "rounds": 1})}  # fmt: skip
ROW_CHILD = "import json; from bench import corpus; print(json.dumps(getattr(corpus, {fn!r})(**{kw!r})))"


def side_by_side(baseline: str, rows=tuple(ROWS), **kw) -> dict:
    """{row: {"baseline": cost dict, "branch": cost dict}}: each row in a fresh process in `baseline`'s checkout and
    then in this one (the same interpreter, one after the other, so under the same load). kw: arguments for every row
    (n_texts, rounds; the wide row takes n_texts and rounds)."""
    out = {}
    for row in rows:
        fn, args = ROWS[row]
        out[row] = {}
        for name, tree in (("baseline", baseline), ("branch", str(ROOT))):
            code = ROW_CHILD.format(fn=fn, kw=args | kw)
            run = subprocess.run([sys.executable, "-c", code], cwd=tree, capture_output=True, text=True)
            if run.returncode and name == "baseline":  # an older tree without this row (cost_deep's layers)
                out[row][name] = {"error": (run.stderr.strip().splitlines() or ["failed"])[-1]}
                continue
            run.check_returncode()
            out[row][name] = json.loads(run.stdout.strip().splitlines()[-1])
        print(row, {k: {m: v[m] for m in v if m.endswith("_vs_sdpa")} for k, v in out[row].items()}, flush=True)
    return out


if __name__ == "__main__":
    base = os.environ.get("BENCH_BASELINE")
    print(json.dumps(side_by_side(base) if base else corpus(), indent=1))
