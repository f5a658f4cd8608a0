"""Markdown for docs/benchmarks.md from the results dict of `python -m bench` (between the two markers)."""

from __future__ import annotations

from pathlib import Path

BEGIN = "<!-- bench:begin (written by `python -m bench`; edit outside these markers) -->"
END = "<!-- bench:end -->"


def _mb(n: float) -> str:
    return f"{n / 1e6:.2f} MB"


def _header(res: dict) -> str:
    m = res["machine"]
    return f"""Generated {res["date"]} by `{res["command"]}` in {res["seconds"]:.0f} s.

Machine: {m["cpu"]}, {m["cores"]} cores, {m["gpu"] or "no GPU"}; Python {m["python"]}, torch {m["torch"]} on
{m["threads"]} threads (as the dashboard sets them), transformers {m["transformers"]}, streamlit {m["streamlit"]},
plotly {m["plotly"]}, playwright {m["playwright"]}. Load average (1, 5, 15 min): {m["load_start"]} at the start,
{res["load_end"]} at the end."""


def _cpu(c: dict) -> str:
    rows = "\n".join(
        f"| {r['tokens']} | {r['sdpa_ms']:.1f} ms | {r['eager_ms']:.1f} ms | {r['trace_ms']:.1f} ms | "
        f"{r['trace_vs_sdpa']:.2f}x | {r['trace_vs_eager']:.2f}x | **{r['trace_vs_sdpa_cpu1']:.2f}x** | "
        f"**{r['trace_vs_eager_cpu1']:.2f}x** | {_mb(r['trace_bytes'])} |"
        for r in c["rows"]
    )
    return f"""### attnviz.trace against the forwards it replaces (CPU, {c["model"]}, {c["layers"]}x{c["heads"]} heads)

Median of {c["rounds"]} rounds, tokenizer included. A ratio is the median over rounds of trace / reference, each
round running the three back to back: wall-clock time at the dashboard's thread count, then again with torch on one
thread timed by the process's CPU time (*1 thread, CPU*: the work itself, which waiting for a core does not
inflate). Bytes: the numpy arrays one trace holds. Trace weights against eager's: max abs difference
{max(r["max_diff_vs_eager"] for r in c["rows"]):.1e}.

| tokens | SDPA forward | eager + output_attentions | attnviz.trace | trace / SDPA | trace / eager | \
trace / SDPA, 1 thread, CPU | trace / eager, 1 thread, CPU | bytes per trace |
|---:|---:|---:|---:|---:|---:|---:|---:|---:|
{rows}"""


def _mha(m: dict) -> str:
    return f"""### attnviz.MultiHeadAttention against torch.nn.MultiheadAttention (CPU)

Same weights (`MultiHeadAttention.from_torch`; outputs differ by {m["max_diff"]:.1e}); both return per-head weights
(torch: `need_weights=True, average_attn_weights=False`). Median of {m["rounds"]} rounds, timed as above.

| input | torch | attnviz | attnviz / torch | attnviz / torch, 1 thread, CPU |
|---|---:|---:|---:|---:|
| batch {m["batch"]}, {m["tokens"]} tokens, d_model {m["d_model"]}, {m["heads"]} heads | {m["torch_ms"]:.1f} ms | \
{m["attnviz_ms"]:.1f} ms | {m["ratio"]:.2f}x | **{m["ratio_cpu1"]:.2f}x** |"""


def _browser(b: dict) -> str:
    return f"""### The dashboard in Chromium {b["chromium"]} (Heads page)

Median of {b["rounds"]} rounds after a warm-up, timed in the page from the key press (Ctrl+Enter in the sentence
box, an arrow key on the layer slider) to the first change inside a Plotly chart, and to the end of the script run.
Every new sentence ({b["tokens"]} tokens) is traced afresh (not cached).

| action | first heatmap drawn | script run over |
|---|---:|---:|
| new sentence | **{b["sentence_s"]:.2f} s** | {b["sentence_done_s"]:.2f} s |
| layer change | **{b["layer_s"]:.2f} s** | {b["layer_done_s"]:.2f} s |

First page load (server healthy, model not yet loaded): {b["first_load_s"]:.1f} s.

Bytes for one {b["bytes_tokens"]}-token sentence: the Heads page receives {_mb(b["page_bytes"])} over its WebSocket;
bertviz 1.4.1's head_view HTML with every layer {_mb(b["bertviz_bytes"])} (computed as bertviz builds it, see
`bench/browser.py`): **bertviz / Heads page = {b["bertviz_vs_page"]:.1f}x**."""


def _gpu(g: dict) -> str:
    title = "### GPU: Llama-3.2-1B-shaped model, random weights, bfloat16\n\n"
    if "skipped" in g:
        return title + f"Not measured: {g['skipped']}. The CPU figures above stand."
    rows = [
        f"| {r['tokens']} | {r['sdpa_ms']:.1f} ms | **{r['trace_vs_sdpa']:.2f}x** | {_mb(r['trace_bytes'])} | "
        f"{r['heads_page_layer_ms']:.1f} ms | "
        + (f"{r['eager_ms']:.1f} ms ({r['eager_vs_sdpa']:.1f}x) |" if "eager_ms" in r else f"{r['eager']} |")
        for r in g["rows"]
    ]
    head = "| tokens | SDPA forward | trace / SDPA | held per trace | Heads page, one layer | eager + weights to host |"
    table = head + "\n|---:|---:|---:|---:|---:|---|\n" + "\n".join(rows)
    return title + f"{g['device']}, torch {g['torch']}.\n\n{table}"


SECTIONS = {"cpu": _cpu, "mha": _mha, "browser": _browser, "gpu": _gpu}


def render(res: dict) -> str:
    parts = [_header(res)] + [section(res[group]) for group, section in SECTIONS.items() if group in res]
    parts += [f"**{group} failed**: `{err}`" for group, err in res.get("errors", {}).items()]
    return "\n\n".join(parts)


def write(doc: Path, res: dict) -> None:
    block = f"{BEGIN}\n\n{render(res)}\n\n{END}"
    text = doc.read_text() if doc.exists() else "# Benchmarks\n"
    if BEGIN in text and END in text:
        text = text[: text.index(BEGIN)] + block + text[text.index(END) + len(END) :]
    else:
        text = text.rstrip() + "\n\n" + block + "\n"
    doc.write_text(text)
