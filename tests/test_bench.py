"""The benchmark command still runs (smallest sizes, one round) and its report renders; no speed is asserted."""

from bench import cpu, gpu, report
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


def test_gpu_code_path_runs_on_a_tiny_llama_and_renders():
    tiny = gpu.LLAMA_1B | {"num_hidden_layers": 1, "hidden_size": 32, "num_attention_heads": 4, "head_dim": 8}
    tiny |= {"num_key_value_heads": 2, "intermediate_size": 64, "vocab_size": 100}
    res = gpu.run(sizes=(8,), rounds=1, warmup=0, shape=tiny, device="cpu")
    row = res["rows"][0]
    assert row["sdpa_ms"] > 0 and row["eager_vs_sdpa"] > 0 and row["trace_vs_sdpa"] > 0
    assert row["trace_bytes"] > 0 and row["heads_page_layer_ms"] > 0
    assert "| 8 | " in report.render(_results(gpu=res))
