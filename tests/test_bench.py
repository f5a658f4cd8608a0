"""The benchmark command still runs (smallest sizes, one round) and its report renders; no speed is asserted."""

import mmap

import numpy as np
import torch

import attnviz
from bench import geometry, llama8b, module, report, traces
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


def test_the_corpus_gpu_rows_run_on_cpu_and_price_a_corpus_from_the_times_per_text():
    res = GROUPS["corpus_gpu"](models=(("tiny Llama", SMALL[0][1], 2),), tokens=48, rounds=1, warmup=0, device="cpu")
    (row,) = res["rows"]
    assert "failed" not in row, row
    assert min(row[f"{k}_ms_per_text"] for k in ("sdpa", "profile", "profile_distances")) > 0
    assert row["profile_vs_sdpa"] > 0
    # 100,000 texts at the measured time per text, in hours; eight GPUs share them
    assert abs(row["profile_h_100k_1gpu"] - row["profile_ms_per_text"] * 100_000 / 3.6e6) < 0.01
    assert abs(row["profile_h_100k_8gpu"] - row["profile_h_100k_1gpu"] / 8) < 0.01


def test_a_row_that_could_not_be_measured_says_why_in_its_row_and_its_goal():
    why = "InputError: The model ran out of memory on this text: try a shorter text or a smaller model."
    gpu = {"device": "NVIDIA H200", "rows": [{"model": "Llama-3-8B shape", "tokens": 32768, "failed": why}]}
    text = report.render(_results(gpu=gpu))
    assert f"| Llama-3-8B shape | 32,768 | - | not measured: {why} |" in text
    assert f"| Llama-3-8B, 32,768 tokens | trace / SDPA | 1.30x | {why} |" in text


def test_the_query_key_pca_row_is_measured_against_the_covariance_route_and_shows_its_goal():
    row = geometry.pca(points=2_000, rounds=1, warmup=0)
    assert row["max_rel_diff"] < 1e-6 and row["pca_ms"] > 0 and row["ratio"] > 0
    text = report.render(_results(geometry=row))
    assert "| 2,000 points, head dim 64 |" in text and "under 1,000 ms" in text


# Llama-3-8B's structure at a tiny size: 8 query heads share 2 key/value heads (as 32 share 8), 2 layers
TINY_8B = traces.LLAMA_8B | {
    "num_hidden_layers": 2,
    "hidden_size": 64,
    "num_attention_heads": 8,
    "num_key_value_heads": 2,
    "head_dim": 16,
    "intermediate_size": 128,
    "vocab_size": 1000,
}


def _shapes(h: int, kv: int, d: int, n: int, itemsize: int) -> dict:
    """A layer's bytes as its arrays' shapes give them: q [h, n, d], k and v [kv, n, d]; max and log-sum [h, n] and
    what each head writes [h, n] in float32."""
    q, k, v, rows = (np.empty((h, n, d)).size, np.empty((kv, n, d)).size, np.empty((kv, n, d)).size, h * n)
    return {"values": (q + k + v) * itemsize + 3 * rows * 4, "no values": (q + k) * itemsize + 2 * rows * 4}


def test_llama8b_group_on_a_tiny_llama_reads_what_eager_attention_gives_and_holds_what_the_shapes_predict():
    n = 160  # over one 128-query window: the last window is a real slice
    loaded = traces.llama_model("tiny 8B-structured Llama", TINY_8B, dtype=torch.float32)  # eager's weights exact
    row, tr = llama8b.measure(loaded, n, rounds=1)
    model = loaded.model
    model.set_attn_implementation("eager")
    with torch.inference_mode():
        eager = model(torch.tensor([tr.provenance.input_ids]), output_attentions=True).attentions[0][0].numpy()
    got = llama8b.reads(tr)
    np.testing.assert_allclose(got["column"](), eager[:, :, 0], atol=1e-6)
    np.testing.assert_allclose(got["window"]().weights, eager[:, n - 128 :, n - 128 :], atol=1e-6)
    np.testing.assert_array_equal(tr.layer_mask(0), np.tril(np.ones((n, n), bool)))  # causal, and kept by structure:
    assert row["mask"] == "causal" and row["mask_bytes"] == 0  # no [T, T] array held
    shapes = _shapes(8, 2, 16, n, 4)
    assert row["bytes_layer"] == row["predicted_layer"] == shapes["values"] == tr.nbytes // 2
    no_values = attnviz.trace(loaded, " ".join(tr.tokens), values=False)
    assert (
        row["bytes_layer_no_values"] == row["predicted_layer_no_values"] == shapes["no values"] == no_values.nbytes // 2
    )
    assert row["tokens"] == n and row["layers"] == 2 and row["growth_bytes"] >= 0
    assert min(row[k] for k in ("trace_cpu_s", "sdpa_cpu_s", "trace_vs_sdpa_cpu1", "column_ms", "window_ms")) > 0
    text = llama8b_text(row)
    mib = f"{shapes['values'] / 2**20:.1f} MiB"
    assert f"| held per layer, values kept | {mib} (shapes: {mib}, 1.000x) | within 10% of the shapes | met |" in text
    assert f"| 32 layers, values kept (values=True) | {32 * shapes['values'] / 2**30:,.2f} GiB |" in text


def test_llama8b_bytes_in_bfloat16_are_the_shapes_and_memory_growth_sees_an_allocation():
    loaded = traces.llama_model("tiny 8B-structured Llama", TINY_8B)  # bfloat16, as the group builds it
    tr = attnviz.trace(loaded, traces.sentence(40, special=0))
    held = llama8b.held(tr)
    assert (
        held["bytes_layer"] == _shapes(8, 2, 16, 40, 2)["values"] == llama8b.predicted(loaded.model.config, 40, 2, True)
    )
    assert held["bytes_layer_no_values"] == _shapes(8, 2, 16, 40, 2)["no values"]
    block, grown = llama8b.grown(_fresh_pages)
    assert block.nbytes <= grown < 2 * block.nbytes


def _fresh_pages() -> np.ndarray:
    """128 MiB of pages new to the process, every one written: an anonymous mapping of its own, so no page can come
    from memory the allocator already holds resident (np.ones reused such memory once in a whole-suite run)."""
    block = np.frombuffer(mmap.mmap(-1, 2**27), dtype=np.uint8)
    block[:] = 1
    return block


def llama8b_text(row: dict) -> str:
    return report.llama8b(_results(llama8b={"device": "CPU", "rows": [row]}))


def test_speed_table_sets_this_checkout_beside_the_baseline_against_issue_28s_goals():
    from bench import speed

    def tree(scale: float) -> dict:
        pages = {"heads": {"first_s": [2.5 * scale, 9.0, 2.0 * scale], "click_s": [0.9 * scale], "again_s": [0.5 * scale],
                           "link_again_s": [2.9 * scale], "bytes": 1}}  # fmt: skip
        return {"tree": f"t{scale}", "cold_s": 4.0 * scale, "link_s": 3.0 * scale, "sentence_s": 0.2 * scale,
                "layer_s": 0.5 * scale, "pages": pages}  # fmt: skip

    text = speed.render({"load_start": 1.0, "load_end": 2.0, "branch": tree(1), "baseline": tree(3)})
    assert "| cold_s | 4.00 | 12.00 | 3.0x | < 5 | met |" in text
    assert "| link_s | 3.00 | 9.00 | 3.0x | < 2 | **no** |" in text
    assert "| heads: first visit, link in a new tab | 2.50 | 7.50 | 3.0x | < 3 | met |" in text  # the rounds' median
    assert "| heads: first visit, click in an open tab | 0.90 | 2.70 | 3.0x | < 3 | met |" in text  # the < 3 s row
    assert "| heads: again, same tab | 0.50 | 1.50 | 3.0x | < 1 | met |" in text  # the row the < 1 s goal is judged on
    assert "| heads: again, link in a new tab | 2.90 | 8.70 | 3.0x | < 3 | met |" in text


IMPORTTIME = """\
import time: self [us] | cumulative | imported package
import time:       100 |        100 |   streamlit.cli_util
import time:       200 |        300 | streamlit.web.cli
import time:      1000 |       1000 |       sympy.core
import time:       500 |       1500 |     torch.fx.experimental.symbolic_shapes
import time:       300 |       1800 |   torch.distributed.tensor
import time:        40 |         40 |     torch._dynamo.config
import time:        60 |        100 |   torch._dynamo
import time:       700 |        700 |     torch.fx.node
import time:        50 |       2650 | transformers.modeling_utils
import time:       900 |        900 | torch.fx.graph
import time:         5 |          5 | scipy
"""


def test_import_groups_count_what_an_unused_module_imports_as_that_module_and_skip_the_server():
    from bench import imports

    groups = imports.grouped(IMPORTTIME)
    # sympy and torch.fx under torch.distributed.tensor are its cost; torch.fx.node under transformers is torch's;
    # the server's own lines (streamlit, up to streamlit.web.cli) are not counted
    expected = {"torch.distributed.tensor": 0.0018, "torch._dynamo": 0.0001, "transformers": 0.00005,
                "torch": 0.0016, "scipy": 0.000005}  # fmt: skip
    assert set(groups) == set(expected)
    assert all(abs(groups[k] - v) < 1e-12 for k, v in expected.items()), groups
    row = {"server": 0.3, "attnviz.ui": 1.0, "modeling code": 2.0, "model": 0.5, "groups": groups, "unused": 0.0019}
    text = imports.render({"rows": {"branch": [row], "baseline": [row | {"model": 1.5}]}, "loads": [[1.0]]})
    assert "| **after the server's own start** | **3.50** | **4.50** |" in text
    assert "| - torch.distributed.tensor | 0.00 | 0.00 |" in text


def test_page_runs_time_the_heads_and_masks_server_runs_in_process():
    from bench import page_runs

    rows = page_runs.runs(n=1)
    assert set(rows) == {"heads_sentence", "heads_layer", "masks_sentence"}
    assert all(wall > 0 and cpu > 0 for wall, cpu in rows.values())
