"""The Score functions page at 2,048 tokens of the tiny Llama, this checkout against another (issue 28's rows).

    python -m bench.scores_page browser BASELINE [ROUNDS]   bench.speed's four page rows for `scores` only, both
                                                          trees served at once and alternated every round
    python -m bench.scores_page cpu [ROUNDS]                this checkout's server run of the page in-process
                                                          (AppTest): process CPU seconds, first visit / revisit

Run `cpu` once per tree (the tree's directory as the working directory) in alternation for a before/after pair.
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path

from bench.browser import chromium
from bench.measure import OUT, load, served
from bench.speed import ROWS, N, long_text, page_row, say, tiny_llama


async def browser_rows(baseline: str, rounds: int) -> dict:
    """{tree: {row: [seconds per round]}} for `scores`; the trees' order flips every round."""
    trees = {"branch": Path.cwd(), "baseline": Path(baseline).resolve()}
    env = {"ATTNVIZ_HOSTED": "0", "ATTNVIZ_MAX_TOKENS": str(N)}
    out = {name: {} for name in trees} | {"load": [load()]}
    with tempfile.TemporaryDirectory() as tmp:
        folder = str(tiny_llama(Path(tmp) / "long_llama"))
        with (
            served(OUT / "scores-branch.log", root=trees["branch"], env=env) as (_, branch),
            served(OUT / "scores-baseline.log", root=trees["baseline"], env=env) as (_, base),
        ):
            bases = {"branch": branch, "baseline": base}
            async with chromium() as browser:
                for r in range(rounds):
                    for name in list(trees) if r % 2 == 0 else list(trees)[::-1]:
                        row = await page_row(browser, bases[name], "scores", folder, r, N, out[name])
                        say(name, r, *(row[k][-1] for k in ROWS), row["bytes"])
                    out["load"].append(load())
    return out


def cpu_seconds(rounds: int) -> dict:
    """Process CPU seconds of the page's server run in AppTest, one session per round: the model's trace cached by a
    visit to Export first, then Score functions (first visit), Export, Score functions again (revisit)."""
    from streamlit.testing.v1 import AppTest

    from attnviz.trace.window_cache import clear_results

    out = {"first": [], "again": [], "load": [load()]}
    with tempfile.TemporaryDirectory() as tmp:
        folder = str(tiny_llama(Path(tmp) / "long_llama"))
        for r in range(rounds):
            clear_results()
            at = AppTest.from_file("app.py", default_timeout=600)
            for key, value in dict(source="hub", model=folder, text=long_text(r, N), max_tokens=N).items():
                at.session_state[key] = value
            at.switch_page("app_pages/export.py").run()
            for row in ("first", None, "again"):
                t = time.process_time()
                at.switch_page("app_pages/scores.py" if row else "app_pages/export.py").run()
                assert not at.exception, [e.value for e in at.exception]
                if row:
                    out[row].append(time.process_time() - t)
            out["load"].append(load())
    return out


if __name__ == "__main__":
    what, *rest = sys.argv[1:]
    if what == "browser":
        result = asyncio.run(browser_rows(rest[0], int(rest[1]) if len(rest) > 1 else 3))
    else:
        result = cpu_seconds(int(rest[0]) if rest else 3)
    print(json.dumps(result))
