"""The Export page in AppTest: the provenance panel, and a saved .npz reopened from the upload alone."""

from __future__ import annotations

import numpy as np
from helpers import figures, run_page, table_rows, z_arrays

import attnviz
from attnviz import export

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
