"""The benchmark suite still runs: `python -m bench --quick` on the core benches produces numbers and ratios.

No timing is asserted (the machine is shared and times swing by 2x); only that each bench measured
something and that the report and the figure can be written from the results.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _finite_summary(s: dict) -> None:
    assert s["n"] >= 1
    for k in ("median", "min", "max"):
        assert math.isfinite(s[k]) and s[k] > 0, (k, s)
    assert s["min"] <= s["median"] <= s["max"]


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench") / "results.json"
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    cmd = [
        sys.executable,
        "-m",
        "bench",
        "--quick",
        "--no-bench-env",
        "--only",
        "trace,mha,fix,scaling",
        "--json",
        str(out),
    ]
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return json.loads(out.read_text())


def test_quick_run_records_the_machine_and_the_command(quick):
    assert quick["quick"] is True and quick["errors"] == {}
    assert "-m bench" in quick["command"] and "--quick" in quick["command"]
    m = quick["machine"]
    assert m["cores"] >= 1 and m["memory_gb"] > 0 and m["python"] and m["torch"]


def test_trace_overhead_gives_times_and_ratios(quick):
    t = quick["trace_overhead"]
    for name in ("eager output_attentions", "attnviz.trace", "capturing forward only"):
        _finite_summary(t[name])
    _finite_summary(t["ratios"]["attnviz.trace"])
    assert math.isfinite(t["ratio"]) and math.isfinite(t["ratio_of_medians"]) and t["target"] == 1.15
    assert t["max_abs_diff_weights_vs_eager"] < 1e-5  # both paths computed the same attention


def test_mha_vs_torch_gives_times_and_ratios(quick):
    m = quick["mha_vs_torch"]
    _finite_summary(m["attnviz.MultiHeadAttention (all four stages)"])
    _finite_summary(m["torch.nn.MultiheadAttention (per-head weights)"])
    assert math.isfinite(m["ratio"]) and m["target"] == 1.25
    assert m["max_abs_diff_output"] < 1e-4 and m["max_abs_diff_weights"] < 1e-5


def test_before_after_fixes_are_measured_in_the_same_run(quick):
    for key in ("mha_vs_torch", "trace_vs_eager", "mha_vs_torch_cpu1", "trace_vs_eager_cpu1"):
        _finite_summary(quick["fix"][key]["before"])
        _finite_summary(quick["fix"][key]["after"])
    _finite_summary(quick["fix"]["trace_vs_eager"]["fix 1 only"])


def test_before_fix_patches_reproduce_the_same_trace():
    """The 'before' code the bench swaps in computes the same attention as the current code."""
    import attnviz
    import numpy as np
    from bench import before_after

    lm = attnviz.load_model()
    now = attnviz.trace(lm, "the cat sat on the mat", causal=True)
    run = before_after._with(
        lambda: attnviz.trace(lm, "the cat sat on the mat", causal=True),
        ("attnviz.attention", "softmax", before_after.softmax_before_fix),
        ("attnviz.models", "_Recorder", before_after._recorder_before_fix()),
    )
    from attnviz import models

    stacked = []
    layers = models._layers
    models._layers = lambda records, out, name: stacked.append(any(x[name] is not None for x in records)) or layers(
        records, out, name
    )
    try:
        old = run()
        attnviz.trace(lm, "the cat sat on the mat", causal=True)
    finally:
        models._layers = layers
    assert stacked == [True, True, False, False]  # the 'before' run really took the old path, the current one not
    for name in ("scores", "weights", "mask"):
        np.testing.assert_array_equal(getattr(old, name), getattr(now, name))


def test_scaling_rows_have_times_bytes_and_memory(quick):
    rows = quick["scaling"]["rows"]
    assert [r["n_tokens"] for r in rows] == [8, 16, 32]
    for r in rows:
        _finite_summary(r["trace"])
        _finite_summary(r["eager"])
        assert r["trace_bytes"] > 0
    assert rows[-1]["trace_bytes"] > rows[0]["trace_bytes"]  # the trace grows with T^2
    assert rows[-1]["mem_trace"]["peak_growth"] > 0 and rows[-1]["mem_eager"]["result_bytes"] > 0
    assert quick["scaling"]["fit"] is not None


def test_report_and_figure_are_written_from_the_results(quick, tmp_path):
    from bench import plot, report

    doc = tmp_path / "benchmarks.md"
    doc.write_text("# Benchmarks\n\n" + report.BEGIN + "\nold\n" + report.END + "\n\n## Commentary\nkept by hand\n")
    report.write(doc, quick, "fig.svg")
    text = doc.read_text()
    assert "kept by hand" in text and "\nold\n" not in text
    assert "full trace" in text and "MultiHeadAttention" in text and "n/a (--quick)" in text
    svg = plot._svg(quick["scaling"], tmp_path / "fig.svg")
    assert svg.read_text().startswith("<svg")
