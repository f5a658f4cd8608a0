"""The benchmark command still runs (smallest sizes, one round) and its report renders; no speed is asserted."""

from bench import cpu, llama, report
from bench.__main__ import SMALL
from bench.measure import load, machine


def _results(**groups) -> dict:
    return {
        "command": "python -m bench",
        "date": "today",
        "seconds": 1.0,
        "machine": machine(),
        "load_end": load(),
    } | groups


def test_cpu_groups_measure_positive_ratios_and_the_report_shows_them():
    forwards = cpu.forwards(sizes=(8,), rounds=1, warmup=0)
    mha = cpu.mha(batch=2, tokens=8, d_model=32, heads=4, rounds=1, warmup=0)
    (row,) = forwards["rows"]
    assert row["tokens"] == 8 and min(row[k] for k in row if k.startswith("trace_vs_")) > 0
    assert row["trace_bytes"] >= 2 * forwards["layers"] * forwards["heads"] * 8 * 32 * 4  # q and k, head dim 32
    assert row["max_diff_vs_eager"] < 1e-5 and mha["ratio"] > 0 and mha["max_diff"] < 1e-5
    text = report.render(_results(cpu=forwards, mha=mha))
    assert "| 8 | " in text and "trace / SDPA" in text and f"**{mha['ratio_cpu1']:.2f}x**" in text


def test_llama_rows_run_on_cpu_through_the_gpu_code_path_and_render_with_the_goals():
    (name, shape, _, _), sizes = SMALL[0], (160,)  # over one 128-token window: the last window is a real slice
    res = llama.gpu(models=((name, shape, sizes, 2),), warmup=0, device="cpu")
    (row,) = res["rows"]
    assert row["tokens"] == 160 and row["layers"] == shape["num_hidden_layers"]
    assert row["trace_vs_sdpa"] > 0 and row["eager_vs_sdpa"] > 0 and row["trace_vs_sdpa_cpu1"] > 0
    assert min(row[k] for k in ("column_ms", "window_ms", "heads_page_ms")) > 0
    assert row["bytes"] > 0
    text = report.render(_results(llama=res, gpu={"skipped": "no GPU in this test"}))
    assert "| tiny Llama | 160 |" in text and "Goals (issue 19)" in text and "not measured" in text
