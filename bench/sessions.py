"""Memory per session at the bounds of the dearest pages, on a real server (scripts/serve.sh, hosted mode).

N sessions (one Chromium context each, its own text so nothing is shared through the trace cache) open, all at
once, either the Masks page at its bounds (256 tokens + pad_to=256, apply=all, two hidden tokens) or the Export page
holding the largest allowed upload (a 64 MB-unpacked trace file under the 1 MB upload limit; each session its own
file, differing in one token, so that no two share a trace in the cache, which keeps an upload under its digest).
The server's RSS is read from /proc before, at its peak (VmHWM) and once every page is drawn; a page that showed the
heavy gate's "Queued:" message (attnviz.ui.heavy) is counted, and the time to its first answer or that message is
kept. A fresh server per row; docs/deploy.md has the rows (16 Masks and 32 upload sessions at most so far).
Run: python -m bench.sessions [--sessions 8 16 32] [--kind masks upload]
"""

from __future__ import annotations

import argparse
import asyncio
import time
from pathlib import Path
from urllib.parse import quote

import numpy as np

from bench.browser import chromium
from bench.measure import OUT, served
from bench.traces import sentence

DONE = """(figure) => !!document.querySelector("[data-testid='stApp'][data-test-script-state='notRunning']") &&
  Array.from(document.querySelectorAll('.js-plotly-plot')).some(gd => gd._fullLayout && gd.querySelector('.main-svg')
    && (figure === null || ((gd.layout || {}).meta || {}).figure === figure))"""
# Installed before the page loads: notes the first time the heavy gate's "Queued:" message is on the page, however
# briefly (polling the text from here missed most of them on a busy host: 1 of 8 sessions seen queued).
WATCH_QUEUE = """new MutationObserver(() => { if (!window.__queued && document.body &&
  document.body.innerText.includes('Queued:')) window.__queued = performance.now(); })
  .observe(document, {childList: true, subtree: true, characterData: true});"""
QUEUED = "() => window.__queued || false"


def largest_upload(path: Path, i: int = 0) -> Path:
    """A valid trace file at the hosted bounds: 2 layers x 127 heads x 256 tokens of float16 scores and weights,
    64 MB unpacked, about 66 kB packed (format 1's dense stages, which still open: the most a file can make the
    server compute); its last token names `i`, so each session's file has its own digest."""
    import sys

    sys.path.insert(0, str(Path(__file__).parents[1] / "tests"))
    from helpers import make_trace, npz_members, npz_of

    from attnviz import export

    members = npz_members(export.trace_npz(make_trace(["a"] * 3, n_layer=2, n_head=1)))
    tokens = ["a"] * 255 + [f"s{i}"]
    members["provenance.json"].update(tokens=tokens, key_tokens=tokens, format="attnviz-trace/1")
    members.update(
        scores=np.zeros((2, 127, 256, 256), np.float16),
        weights=np.full((2, 127, 256, 256), 1 / 256, np.float16),
        mask=np.ones((2, 256, 256), bool),
    )
    path.write_bytes(npz_of({k: members[k] for k in ("provenance.json", "scores", "weights", "mask")}))
    return path


def status(pid: int) -> dict[str, float]:
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line)
    return {k: int(fields[k].split()[0]) / 1024 for k in ("VmRSS", "VmHWM")}


async def session(browser, base: str, kind: str, i: int, upload: Path) -> dict:
    page = await (await browser.new_context(viewport={"width": 1280, "height": 900})).new_page()
    page.set_default_timeout(600_000)
    await page.add_init_script(WATCH_QUEUE)
    queued = [False]
    t0 = time.monotonic()
    if kind == "masks":
        text = quote(sentence(256, seed=100 + i))
        await page.goto(f"{base}/masks?text={text}&pad_to=256&apply=all&hide=3&hide=5", wait_until="domcontentloaded")
    else:
        await page.goto(f"{base}/export?text=a%20cat", wait_until="domcontentloaded")
        await page.wait_for_selector("input[type=file]", state="attached")
        await page.set_input_files("input[type=file]", str(upload.with_name(f"largest-upload-{i}.npz")))
    while not await page.evaluate(DONE, None if kind == "masks" else "saved_grid"):
        queued[0] = queued[0] or await page.evaluate(QUEUED)
        await asyncio.sleep(0.25)
    seconds = time.monotonic() - t0
    queued[0] = queued[0] or await page.evaluate(QUEUED)  # ms after the page's navigation began
    first = min(seconds, queued[0] / 1000) if queued[0] else seconds  # answered, or told it waits
    return {"seconds": seconds, "queued": bool(queued[0]), "first": first}


async def level(kind: str, n: int, upload: Path) -> dict:
    with served(OUT / f"sessions-{kind}-{n}.log") as (proc, base):
        async with chromium() as browser:
            warm = await browser.new_page()  # the model loaded once before the sessions come
            await warm.goto(f"{base}/?text=warm", wait_until="domcontentloaded")
            await warm.wait_for_function("() => document.querySelectorAll('.js-plotly-plot').length > 0",
                                         timeout=600_000)  # fmt: skip
            before = status(proc.pid)["VmRSS"]
            runs = await asyncio.gather(*(session(browser, base, kind, i, upload) for i in range(n)))
            after = status(proc.pid)
    secs, first = sorted(r["seconds"] for r in runs), sorted(r["first"] for r in runs)
    return {"kind": kind, "sessions": n, "warm_mb": before, "peak_mb": after["VmHWM"], "after_mb": after["VmRSS"],
            "queued": sum(r["queued"] for r in runs), "p50_s": secs[len(secs) // 2], "max_s": secs[-1],
            "first_max_s": first[-1], "load": Path("/proc/loadavg").read_text().split()[:3]}  # fmt: skip


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sessions", type=int, nargs="+", default=[8, 16])
    p.add_argument("--kind", nargs="+", default=["masks", "upload"], choices=["masks", "upload"])
    args = p.parse_args(argv)
    OUT.mkdir(parents=True, exist_ok=True)
    upload = OUT / "largest-upload-0.npz"
    for i in range(max(args.sessions) if "upload" in args.kind else 0):
        largest_upload(OUT / f"largest-upload-{i}.npz", i)
    for kind in args.kind:
        for n in args.sessions:
            print(asyncio.run(level(kind, n, upload)), flush=True)


if __name__ == "__main__":
    main()
