"""The Score functions page at 2,048 tokens of the tiny Llama, this checkout against another (issue 28's rows).

    python -m bench.scores_page browser BASELINE [ROUNDS]   bench.speed's four page rows for `scores` only, both
                                                          trees served at once and alternated every round
    python -m bench.scores_page llama FOLDER                the tiny Llama written to FOLDER, for `cpu`
    python -m bench.scores_page cpu ROUND FOLDER            the working directory's server run of the page in-process
                                                          (AppTest): process CPU seconds, first visit / revisit

`cpu` runs one round in a fresh process; alternate trees round by round for a before/after pair, e.g. for main:
    cd /work/main && PYTHONPATH=. HF_HUB_OFFLINE=1 ATTNVIZ_HOSTED=0 ATTNVIZ_MAX_TOKENS=2048 \
        python /path/to/this/bench/scores_page.py cpu 0 FOLDER
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


def cpu_seconds(round_: int, folder: str) -> dict:
    """Process CPU (and wall) seconds of the page's server run in AppTest, one session: the model's trace cached by a
    visit to Export first, then Score functions (first visit), Export, Score functions again (revisit). The tree is
    the working directory's, the text the bench's for `round_`, the model the tiny Llama in `folder`."""
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(Path.cwd() / "app.py"), default_timeout=600)
    for key, value in dict(source="hub", model=folder, text=long_text(round_, N), max_tokens=N).items():
        at.session_state[key] = value
    at.switch_page("app_pages/export.py").run()
    out = {"load": load()}
    for row in ("first", None, "again"):
        cpu, wall = time.process_time(), time.perf_counter()
        at.switch_page("app_pages/scores.py" if row else "app_pages/export.py").run()
        assert not at.exception, [e.value for e in at.exception]
        if row:
            out |= {row: time.process_time() - cpu, f"{row}_wall": time.perf_counter() - wall}
    return out


if __name__ == "__main__":
    what, *rest = sys.argv[1:]
    if what == "browser":
        result = asyncio.run(browser_rows(rest[0], int(rest[1]) if len(rest) > 1 else 3))
    elif what == "llama":
        result = str(tiny_llama(Path(rest[0])))
    else:
        result = cpu_seconds(int(rest[0]), rest[1])
    print(json.dumps(result))
