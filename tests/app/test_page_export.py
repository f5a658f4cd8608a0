"""The Export page in AppTest: the provenance panel, and a saved .npz reopened from the upload alone."""

from __future__ import annotations

import numpy as np
from helpers import deflate_bomb, figures, npz_members, npz_of, run_page, table_rows, texts, z_arrays

import attnviz
from attnviz import export
from attnviz.plots import heatmaps as hm
from attnviz.trace import file as trace_file

PAGE = "app_pages/export.py"
TEXT = "The cat sat on the mat."


def page(**state):
    at = run_page(PAGE, text=TEXT, **state)
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_provenance_panel_and_downloads(bundled):
    at = page()
    assert [t.value for t in at.title] == ["Export"]
    rec = table_rows(at.table[0])
    tr = attnviz.trace(bundled, TEXT)
    want = export.provenance_record(tr, text=TEXT)
    assert rec["text"] == TEXT and rec["model"] == tr.model_name
    assert rec["input_ids"] == export.record_value(want["input_ids"])
    assert {rec[f"version of {k}"] for k in export.versions()} == {str(v) for v in export.versions().values()}
    assert {"attn_implementation", "dtype", "device", "revision", "scale", "options"} <= set(rec)
    assert rec["scale"] == f"{1 / 32**0.5:.7g} (every layer)"  # d_head = 32 in all six layers, said once
    labels = [b.proto.label for b in at.get("download_button")]
    assert labels == ["Download the trace (.npz)", "Download the view (.html)"]


def test_an_uploaded_trace_reopens_its_heads_from_the_file(bundled):
    other = attnviz.trace(bundled, "A dog ran away.", causal=True)  # not the sidebar's sentence
    at = page()
    at.file_uploader(key="ex_upload").upload("t.npz", export.trace_npz(other, text="A dog ran away.")).run()
    assert not at.exception, [e.value for e in at.exception]
    at.slider(key="ex_layer").set_value(3).run()
    grid = figures(at)["saved_grid"]
    shown = z_arrays(grid)
    assert len(shown) == 12
    for h, z in enumerate(shown):
        np.testing.assert_allclose(z, other.layer(3).weights[h], atol=1e-6)
    tables = [table_rows(t) for t in at.table]
    assert tables[-1]["text"] == "A dog ran away."


def test_a_wrong_file_gives_a_message_not_a_traceback():
    at = page()
    at.file_uploader(key="ex_upload").upload("t.npz", b"garbage").run()
    assert not at.exception
    assert any("not an attnviz trace" in e.value for e in at.error)


def test_malformed_and_oversized_uploads_give_a_message_and_the_page_stays_usable(bundled):
    # every malformed kind is refused in tests/test_trace_file.py; here a few reach the page in one session
    good = export.trace_npz(attnviz.trace(bundled, "A dog ran away."), text="A dog ran away.")
    members = npz_members(good)
    bad = {
        "record as a list": {**members, "provenance.json": [1, 2]},
        "string queries": {**members, "q_0": members["q_0"].astype(str)},
        "a scale of 1e30": {**members, "provenance.json": {**members["provenance.json"], "scale": [1e30] * 6}},
    }
    files = {name: npz_of(m) for name, m in bad.items()}
    files |= {"garbage": b"garbage", "a bomb": deflate_bomb(members["provenance.json"])}
    at = page()
    for name, data in files.items():
        at.file_uploader(key="ex_upload").upload(f"{name}.npz", data).run()
        assert not at.exception, (name, [e.value for e in at.exception])
        errors = [e.value for e in at.error]
        assert len(errors) == 1 and ("not an attnviz trace" in errors[0] or "scale must be" in errors[0]
                                     or "once unpacked" in errors[0]), (name, errors)  # fmt: skip
        assert "pickle" not in errors[0] and "saved_grid" not in figures(at)
    at.file_uploader(key="ex_upload").upload("good.npz", good).run()  # the same session opens a good file
    assert not at.exception and not at.error and "saved_grid" in figures(at)


def test_an_upload_is_read_once_and_held_in_the_shared_cache_not_the_session(bundled, monkeypatch):
    opened = []
    real = trace_file.open_npz
    monkeypatch.setattr(trace_file, "open_npz", lambda *a, **k: opened.append(1) or real(*a, **k))
    at = page()
    at.file_uploader(key="ex_upload").upload("t.npz", export.trace_npz(attnviz.trace(bundled, TEXT))).run()
    at.slider(key="ex_layer").set_value(2).run()  # a rerun with the file still there
    assert not at.exception and len(opened) == 1  # not read again
    held = at.session_state["_saved_trace"]  # the session keeps the file's digest; the trace is in the trace cache
    assert isinstance(held[1], str) and len(held[1]) == 64


def test_an_upload_past_the_count_limits_is_refused_and_a_wide_one_drawn_in_part(bundled):
    one = npz_members(export.trace_npz(attnviz.AttentionTrace.from_weights(["a"], np.ones((1, 1, 1, 1)))))
    at = page()
    huge = {**one, "weights": np.ones((1, 100_000, 1, 1), np.float16)}
    at.file_uploader(key="ex_upload").upload("huge.npz", npz_of(huge)).run()
    assert not at.exception and "saved_grid" not in figures(at)
    assert texts(at, "error") == [
        "This trace has 100,000 heads; attnviz opens traces of up to 128 heads here. A model with that many is "
        "beyond what this dashboard draws."
    ]
    wide = {**one, "weights": np.ones((1, 40, 1, 1), np.float16)}
    at.file_uploader(key="ex_upload").upload("wide.npz", npz_of(wide)).run()
    assert not at.exception and not at.error
    assert len(z_arrays(figures(at)["saved_grid"])) == hm.GRID_HEADS
    assert any("heads 0–31 of 40" in c for c in texts(at, "caption"))
    at.slider(key="ex_grid_from").set_value(32).run()
    grid = figures(at)["saved_grid"]
    assert len(z_arrays(grid)) == 32 and grid["layout"]["meta"]["heads"] == [8, 40]
