"""The benchmark command still runs (smallest sizes, one round) and its report renders; no speed is asserted."""

from bench import geometry, module, report, traces
from bench.__main__ import GROUPS, SMALL
from bench.measure import load, machine


def _results(**groups) -> dict:
    return {
        "command": "python -m bench",
        "date": "today",
        "seconds": 1.0,
        "machine": machine(),
        "load_end": load(),
    } | groups


def test_the_bundled_model_and_our_module_are_measured_and_the_report_shows_them():
    bundled = traces.bundled(sizes=(8,), rounds=2, warmup=0)
    mha = module.mha(batch=2, tokens=8, d_model=32, heads=4, rounds=1, warmup=0)
    (row,) = bundled["rows"]
    assert row["tokens"] == 8 and min(row[k] for k in row if k.startswith("trace_vs_")) > 0
    assert {
        "trace_vs_eager",
        "trace_vs_sdpa_cpu1",
        "column_ms",
        "window_ms",
        "heads_page_ms",
        "norms_vs_stages",
    } <= set(row)
    assert row["bytes"] >= 2 * 6 * 12 * 8 * 32 * 4  # q and k of 6 layers x 12 heads, head dim 32, float32
    assert mha["ratio"] > 0 and mha["max_diff"] < 1e-5
    text = report.render(_results(cpu=bundled, mha=mha))
    assert "| bundled all-MiniLM-L6-v2 | 8 |" in text and f"**{mha['ratio_cpu1']:.2f}x**" in text


def test_llama_rows_run_on_cpu_through_the_gpu_code_path_and_render_with_the_goals():
    (name, shape, _, _), n = SMALL[0], 160  # over one 128-token window: the last window is a real slice
    res = GROUPS["gpu"](models=((name, shape, (n,), 2),), warmup=0, device="cpu")
    (row,) = res["rows"]
    assert row["tokens"] == n and row["layers"] == shape["num_hidden_layers"] and row["bytes"] > 0
    assert row["trace_vs_sdpa"] > 0 and row["trace_vs_eager"] > 0 and row["trace_vs_sdpa_cpu1"] > 0
    assert min(row[k] for k in ("column_ms", "window_ms", "heads_page_ms")) > 0
    text = report.render(_results(llama=res, gpu={"skipped": "no GPU in this test"}))
    assert f"| tiny Llama | {n} |" in text and "Goals (issue 19)" in text and "not measured" in text


def test_the_query_key_pca_row_is_measured_against_the_covariance_route_and_shows_its_goal():
    row = geometry.pca(points=2_000, rounds=1, warmup=0)
    assert row["max_rel_diff"] < 1e-6 and row["pca_ms"] > 0 and row["ratio"] > 0
    text = report.render(_results(geometry=row))
    assert "| 2,000 points, head dim 64 |" in text and "under 1,000 ms" in text
