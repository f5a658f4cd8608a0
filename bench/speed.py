"""Issue 28's speed targets in Chromium, this checkout side by side with another (BENCH_BASELINE, e.g. /work/main).

Both trees are served at once by their own scripts/serve.sh (token limit 2,048, hosted mode off so that a local
model folder opens) and every measurement alternates between them, so that a shared host's load weighs on both alike:
- cold_s: from the server's start to the Heads page's first heatmap (the bundled model, the default sentence; the
  browser opens the page as soon as the server answers its health check);
- link_s: a new visitor (a fresh browser context) opening a link to Heads with a new sentence on the running server
  (the median of `redraws` visits a tree, alternated);
- sentence_s / layer_s: a new sentence, then a layer change, redrawn in an open tab (bench.browser's clock; medians
  of `redraws` rounds);
- per page, every page at 2,048 tokens of the grouped-query tiny Llama:
  first_s: opened by a link in a fresh context, with the bytes that visit received;
  again_s: a second visit to the same view as a user makes it, in the same tab: another page chosen in the
  navigation (AWAY, which draws no chart), then this page again (seconds from the click on its link);
  link_again_s: the same link once more in another fresh context;
  click_s: a first visit from a click in an open tab: the app open on another page (FROM: Words, which draws charts,
  so Plotly's script is running; Heads for Words itself) with the model and another text of the same length loaded,
  then a click on this page in the navigation, for a text this page has not yet drawn (seconds from the click).
Seconds are to the charts drawn (the script run over and the page's Plotly charts on screen); a chart counts once it
has drawn (Plotly's first .main-svg in it: every chart draws two or three of them).

Why "again" is measured in the same tab: a fresh browser context starts Streamlit's JavaScript (about 1.3 s on this
2-core host before any of our code runs) and, on a page with a chart, downloads and starts Plotly's (about 2 s more),
so a visit in a new context cannot come under 1 s whatever the server does. A user's second visit to a view
happens in an open tab (to another page and back, or the view reopened), where both are already running: that is the
row issue 28's "second visit under 1 s" is judged on. link_again_s keeps the new-context number beside it. For the
same reason "every page drawn in under 3 s from the click" is judged on click_s, first_s kept beside it: a user who
clicks a page has the app open already.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlencode

from bench.browser import ARM, act, chromium, marker, new_sentence, open_page
from bench.measure import OUT, ROOT, load, served

N = 2048
WORDS = "the cat sat on the mat a dog ran away .".split()
#: page path -> the charts it draws at least (Export draws its charts on request)
PAGES = {"": 3, "scaling": 4, "masks": 4, "module": 2, "headstats": 2, "rollout": 2, "neuron": 1, "scores": 2,
         "words": 2, "pairs": 3, "compare": 1, "ablation": 2, "export": 0}  # fmt: skip
TITLES = {"": "Heads", "scaling": "Scaling", "masks": "Masks", "module": "Our module", "headstats": "Head statistics",
          "rollout": "Rollout", "neuron": "Neuron view", "scores": "Score functions", "words": "Words",
          "pairs": "Sentence pairs", "compare": "Compare", "ablation": "Ablation", "export": "Export"}  # fmt: skip
# Charts that have drawn (each draws two or three .main-svg layers: counting those let half the charts pass)
CHARTS = "Array.from(document.querySelectorAll('.js-plotly-plot')).filter(g => g.querySelector('.main-svg')).length"
DRAWN = """(charts) => {
  const app = document.querySelector("[data-testid='stApp']");
  if (!app || app.getAttribute('data-test-script-state') !== 'notRunning') return false;
  if (!document.querySelector("[data-testid='stMain'] h1")) return false;
  return CHARTS >= charts;
}""".replace("CHARTS", CHARTS)


def long_text(round_: int, n_words: int, mark: int | None = None) -> str:
    """Words of the tiny Llama's vocabulary, turned by `round_` so that each round is a new text; `mark`: a word
    there swapped for one the text never has, so that each mark is a new text of as many tokens."""
    words = WORDS[round_ % len(WORDS) :] + WORDS[: round_ % len(WORDS)]
    words = (words * (n_words // len(words) + 1))[:n_words]
    if mark is not None:
        words[mark % n_words] = "hello"
    return " ".join(words)


def tiny_llama(folder: Path) -> Path:
    """The long-context tiny Llama of the tests (grouped-query: 4 query heads, 2 key/value heads; 8,192 positions)."""
    sys.path.insert(0, str(ROOT / "tests"))
    from tiny_families import build

    return build("long_llama", folder, lm_head=True)  # Ablation predicts


#: the page a same-tab revisit goes to in between (it draws no chart, so every chart on return is drawn anew)
AWAY = {"export": "words"}
#: the page a first visit from a click starts on (it draws charts, so Plotly's script is already running)
FROM = {"words": ""}
# Armed before a click: the charts on show then, which must be gone before the new page's count.
BEFORE = "() => { window.__before = Array.from(document.querySelectorAll('.js-plotly-plot')); }"
# After a click in the navigation: the run it started is over, the page on show is `path`, the charts of the page
# before are gone and `charts` charts are drawn.
DRAWN_AFTER = """([path, charts]) => {
  const t = window.__t;
  if (!t || t.done === undefined) return false;
  if (location.pathname.replace(/\\/+$/, '').split('/').pop() !== path) return false;
  if (!document.querySelector("[data-testid='stMain'] h1")) return false;
  if ((window.__before || []).some(g => document.contains(g))) return false;
  return CHARTS >= charts;
}""".replace("CHARTS", CHARTS)

# On `path` with its own title, the run over and the charts of the page before gone: the untimed step between two
# visits. Export's run can be over before the tab ever shows the running state, so DRAWN_AFTER, which waits for that
# run's end, timed out there now and then (3 minutes each, on either tree).
ARRIVED = """([path, title]) => {
  if (!document.querySelector("[data-testid='stApp'][data-test-script-state='notRunning']")) return false;
  if (location.pathname.replace(/\\/+$/, '').split('/').pop() !== path) return false;
  const h1 = document.querySelector("[data-testid='stMain'] h1");
  return !!h1 && h1.textContent.includes(title) && !(window.__before || []).some(g => document.contains(g));
}"""


async def visit(browser, url: str, charts: int, keep: bool = False):
    """Seconds from opening `url` in a fresh context to its charts drawn, and the bytes its WebSocket received
    (keep: the page as well, left open)."""
    context = await browser.new_context(viewport={"width": 1280, "height": 800})
    page = await context.new_page()
    page.set_default_timeout(600_000)
    got = [0]
    page.on("websocket", lambda ws: ws.on("framereceived", lambda d: got.__setitem__(0, got[0] + len(d))))
    t0 = time.perf_counter()
    await page.goto(url, wait_until="domcontentloaded")
    await page.wait_for_timeout(300)  # the run starts
    await page.wait_for_function(DRAWN, arg=charts, polling=50)
    seconds = time.perf_counter() - t0
    if keep:
        return seconds, got[0], page
    await context.close()
    return seconds, got[0]


async def switch(page, path: str, charts: int, timeout_ms: int = 180_000) -> float:
    """Seconds from a click on `path`'s link in the navigation (the root: Heads) to its run over and charts drawn;
    NaN (said on stderr) when it is not drawn within timeout_ms, so that one lost click does not end the run."""
    await page.evaluate(ARM)
    await page.evaluate(BEFORE)
    link = page.locator("[data-testid='stSidebarNav'] a").filter(has=page.get_by_text(TITLES[path], exact=True))
    t0 = time.perf_counter()
    await link.click()
    try:
        await page.wait_for_function(DRAWN_AFTER, arg=[path, charts], polling=50, timeout=timeout_ms)
    except Exception as e:  # noqa: BLE001 - playwright's TimeoutError; the row then says nan
        say("no redraw after a click on", TITLES[path], type(e).__name__, await page.evaluate("() => window.__t"))
        return float("nan")
    return time.perf_counter() - t0


async def arrive(page, path: str) -> None:
    """A click on `path` in the navigation, untimed: back once that page is on show (ARRIVED)."""
    await page.evaluate(BEFORE)
    await page.locator("[data-testid='stSidebarNav'] a").filter(has=page.get_by_text(TITLES[path], exact=True)).click()
    await page.wait_for_function(ARRIVED, arg=[path, TITLES[path]], polling=50, timeout=180_000)
    await page.wait_for_timeout(300)  # a later run of the same page (the address written back) is over too


async def run(baseline: str | None = None, pages=tuple(PAGES), rounds: int = 1, n_words: int = N, redraws: int = 5):
    """{tree: {row: seconds}} for this checkout ("branch") and BENCH_BASELINE or `baseline` ("baseline")."""
    baseline = baseline or os.environ.get("BENCH_BASELINE")
    trees = {"branch": ROOT} | ({"baseline": Path(baseline).resolve()} if baseline else {})
    env = {"ATTNVIZ_HOSTED": "0", "ATTNVIZ_MAX_TOKENS": str(N)}
    out = {name: {"tree": str(root), "pages": {}} for name, root in trees.items()} | {"load_start": load()}
    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as stack:
        folder = str(tiny_llama(Path(tmp) / "long_llama"))
        async with chromium() as browser:
            bases = {}
            for name, root in trees.items():  # one cold start after the other, each with the browser ready
                proc, bases[name] = stack.enter_context(served(OUT / f"speed-{name}.log", root=root, env=env))
                seconds, _ = await visit(browser, bases[name] + "/", 2)
                out[name]["cold_s"] = time.perf_counter() - proc.started
                out[name]["cold_after_healthy_s"] = seconds
                say(name, "cold_s", out[name]["cold_s"])
            await links(browser, bases, out, redraws)
            await redraw(browser, bases, out, redraws)
            for r in range(rounds):
                for path in pages:
                    for name in trees:
                        row = await page_row(browser, bases[name], path, folder, r, n_words, out[name]["pages"])
                        say(name, path or "heads", *(row[k][-1] for k in ROWS), row["bytes"])
    return out | {"load_end": load()}


async def links(browser, bases: dict, out: dict, rounds: int) -> None:
    """Median seconds of a link to Heads with a new sentence, each visit in a fresh context, alternating trees every
    round (one visit a tree read anywhere from 2.3 to 2.9 s on one host)."""
    times = {name: [] for name in bases}
    for r in range(rounds):
        for i, name in enumerate(bases if r % 2 == 0 else list(bases)[::-1]):
            text, _ = marker(100 + 2 * r + i)
            seconds, _ = await visit(browser, f"{bases[name]}/?{urlencode({'text': text})}", 2)
            times[name].append(seconds)
    for name, values in times.items():
        out[name]["link_s"] = sorted(values)[len(values) // 2]
        say(name, "link_s", out[name]["link_s"], "of", *values)


async def redraw(browser, bases: dict, out: dict, rounds: int) -> None:
    """Median seconds of a new sentence and of a layer change in an open tab, alternating trees every round."""
    tabs = {name: await open_page(browser, base, *marker(200)) for name, base in bases.items()}
    times = {name: {"sentence_s": [], "layer_s": []} for name in bases}
    for r in range(rounds + 1):  # the first round warms up
        for name, page in tabs.items():
            key, layer = ("ArrowRight", 1) if r % 2 == 0 else ("ArrowLeft", 0)
            _, sentence = await new_sentence(page, *marker(201 + r))
            slider = page.locator("[data-testid='stSidebar']").get_by_role("slider").first
            _, moved = await act(page, lambda s=slider, k=key: s.press(k), layer=layer)
            if r:
                times[name]["sentence_s"].append(sentence)
                times[name]["layer_s"].append(moved)
    for name, page in tabs.items():
        await page.context.close()
        out[name] |= {k: sorted(v)[len(v) // 2] for k, v in times[name].items()}
        say(name, "sentence_s, layer_s", out[name]["sentence_s"], out[name]["layer_s"])


async def page_row(browser, base: str, path: str, folder: str, round_: int, n_words: int, rows: dict) -> dict:
    pair = "the dog ran away ." if path == "pairs" else ""
    query = dict(source="hub", model=folder, pair=pair, max_tokens=N)

    def link(text: str, to: str = path) -> str:
        return f"{base}/{to}?" + urlencode(query | {"text": text})

    n = n_words - 60 if path == "pairs" else n_words
    url = link(long_text(round_, n))
    first, nbytes, page = await visit(browser, url, PAGES[path], keep=True)
    away = AWAY.get(path, "export")
    await arrive(page, away)
    again = await switch(page, path, PAGES[path])
    await page.context.close()
    link_again, _ = await visit(browser, url, PAGES[path])
    start, mark = FROM.get(path, "words"), 1 + round_ * len(PAGES) + list(PAGES).index(path)
    # a text of its own (for every page and round), so that neither page has drawn it yet
    _, _, page = await visit(browser, link(long_text(round_, n, mark), start), PAGES[start], keep=True)
    click = await switch(page, path, PAGES[path])
    await page.context.close()
    row = rows.setdefault(path or "heads", {k: [] for k in ("first_s", "click_s", "again_s", "link_again_s")})
    row["bytes"] = nbytes
    for key, value in (("first_s", first), ("click_s", click), ("again_s", again), ("link_again_s", link_again)):
        row[key].append(value)
    return row


def say(*parts) -> None:
    """Progress on stderr: a run cut short on a busy host still leaves its numbers."""
    print("[speed]", *(f"{p:.2f}" if isinstance(p, float) else p for p in parts), file=sys.stderr, flush=True)


GOALS = {"cold_s": 5.0, "link_s": 2.0, "sentence_s": 0.3, "layer_s": 0.3}
#: per page: the row's label and goal (s); "click in an open tab" and "again, same tab" are the rows the goals are
#: judged on, the new-tab rows carry a fresh context's JavaScript start-up (the module's docstring)
ROWS = {"first_s": ("first visit, link in a new tab", 3.0), "click_s": ("first visit, click in an open tab", 3.0),
        "again_s": ("again, same tab", 1.0), "link_again_s": ("again, link in a new tab", 3.0)}  # fmt: skip


def render(group: dict) -> str:
    """A table per target: this checkout, the baseline, their ratio, the goal (issue 28) and whether it is met."""
    names = [n for n in ("branch", "baseline") if n in group]
    head = ["row", *(f"{n} (s)" for n in names), "baseline / branch" if len(names) == 2 else "", "goal (s)", "met"]

    def line(label: str, values: list[float], goal: float) -> list[str]:
        ratio = f"{values[1] / values[0]:.1f}x" if len(values) == 2 and values[0] > 0 else ""
        return [label, *(f"{v:.2f}" for v in values), ratio, f"< {goal:g}", "met" if values[0] < goal else "**no**"]

    rows = [line(k, [group[n][k] for n in names], goal) for k, goal in GOALS.items()]
    for page in group[names[0]]["pages"]:
        med = lambda n, k, p=page: sorted(group[n]["pages"][p][k])[len(group[n]["pages"][p][k]) // 2]  # noqa: E731
        for key, (label, goal) in ROWS.items():
            if all(key in group[n]["pages"][page] for n in names):  # runs before a row existed lack it
                rows.append(line(f"{page}: {label}", [med(n, key) for n in names], goal))
    body = "\n".join("| " + " | ".join(r) + " |" for r in [head, ["---"] * len(head), *rows])
    loads = f"load {group['load_start']} at the start, {group['load_end']} at the end"
    trees = ", ".join(f"{n}: {group[n]['tree']}" for n in names)
    return f"### Pages at {N:,} tokens, side by side ({trees}; {loads})\n\n{body}"
