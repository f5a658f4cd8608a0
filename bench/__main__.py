"""Benchmarks of attnviz against its peers; results in docs/benchmarks.md.

python -m bench                 # everything (about half an hour on 2 cores); rewrites the generated part of the docs
python -m bench --quick         # tiny sizes, one round: checks that the benches run (bench/out/ only)
python -m bench --only gpu      # some groups (cpu, mha, llama, llama8b, geometry, browser, speed, gpu, corpus_gpu);
                                # printed, saved in bench/out/
python -m bench --only llama8b  # an 8B model's layer at 32,768 tokens (up to 15 minutes); rewrites its own block
python -m bench.load            # sessions per replica, in Chromium (docs/deploy.md)
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import sys
import time

import torch

from attnviz import settings
from attnviz.plots import common
from bench import browser, corpus_gpu, geometry, llama8b, module, report, speed, traces
from bench.measure import OUT, ROOT, load, machine

GROUPS = {"cpu": traces.bundled, "mha": module.mha, "llama": traces.llama}  # in this order; then:
GROUPS["geometry"] = geometry.pca
GROUPS["llama8b"] = lambda **kw: {"device": "CPU", "rows": [llama8b.run(**kw)]}
GROUPS["browser"] = lambda **kw: asyncio.run(browser.run(**kw))
GROUPS["speed"] = lambda **kw: asyncio.run(speed.run(**kw))  # side by side with BENCH_BASELINE
GROUPS["gpu"] = lambda **kw: traces.llama(**{"models": traces.GPU, "device": "cuda"} | kw)
GROUPS["corpus_gpu"] = corpus_gpu.run  # a head profile against the forward on a GPU (docs/corpus.md, "Cost")
SMALL = (("tiny Llama", traces.TINY | {"num_hidden_layers": 2, "hidden_size": 64, "head_dim": 8}, (256,), 1),)
QUICK = {"cpu": {"sizes": (16,), "rounds": 1, "warmup": 0}, "llama": {"models": SMALL}, "gpu": {"models": SMALL},
         "llama8b": {"name": SMALL[0][0], "shape": SMALL[0][1], "tokens": 256, "rounds": 1},
         "mha": {"batch": 2, "tokens": 16, "d_model": 64, "heads": 4, "rounds": 1, "warmup": 0},
         "browser": {"rounds": 1, "warmup": 0, "bytes_tokens": 32},
         "speed": {"pages": ("", "headstats"), "n_words": 256, "redraws": 1},
         "geometry": {"points": 1_000, "rounds": 1, "warmup": 0},
         "corpus_gpu": {"models": (("tiny Llama", SMALL[0][1], 2),), "tokens": 64, "rounds": 1, "device": "cpu"}}  # fmt: skip


def run(groups, quick: bool = False) -> dict:
    torch.set_num_threads(settings.torch_threads())  # what the dashboard sets, as its figures' template
    common.template_by_default()
    start = time.perf_counter()
    res = {"date": dt.datetime.now().isoformat(timespec="minutes"), "quick": quick, "machine": machine()}
    for group in groups:
        print(f"[bench] {group} ...", file=sys.stderr, flush=True)
        try:
            res[group] = GROUPS[group](**(QUICK[group] if quick else {}))
        except Exception as e:  # noqa: BLE001 - one broken group must not hide the others
            res.setdefault("errors", {})[group] = f"{type(e).__name__}: {e}"
    return {**res, "load_end": load(), "seconds": time.perf_counter() - start}


def main(argv=None) -> int:
    p = argparse.ArgumentParser("python -m bench", description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--quick", action="store_true", help="tiny sizes and one round, in seconds")
    p.add_argument("--only", action="append", choices=list(GROUPS), help="run only this group (repeatable)")
    args = p.parse_args(argv)
    res = {"command": " ".join(["python -m bench", *(sys.argv[1:] if argv is None else argv)])}
    res |= run(args.only or list(GROUPS), args.quick)
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / ("results-quick.json" if args.quick else "results.json")).write_text(json.dumps(res, indent=1))
    if not args.quick and not args.only:
        report.write(ROOT / "docs" / "benchmarks.md", f"\n{report.render(res)}\n")
    if not args.quick and "llama8b" in res:  # a block of its own, written whenever the group ran
        report.write(ROOT / "docs" / "benchmarks.md", f"\n{report.llama8b(res)}\n", *report.LLAMA8B_MARKERS)
    print(report.render(res) + (f"\n\n{report.llama8b(res)}" if "llama8b" in res else ""))
    return 1 if res.get("errors") else 0


if __name__ == "__main__":
    sys.exit(main())
