"""The default view made ahead (attnviz.ui.made_ahead, attnviz.ui.first_view): a cold start draws from it exactly the
figures the live Heads page draws for the default view; a missing, stale, corrupt or edited file is never used (the
live path runs, with no error); the server writes the file after its first default trace, once."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
from helpers import APP, charts, figures
from streamlit.testing.v1 import AppTest

from attnviz.hf import trace_pretrained
from attnviz.ui import DEFAULT_TEXT, made_ahead


@pytest.fixture(scope="module")
def made(bundled, tmp_path_factory):
    """A folder with the default view made ahead, from the session's bundled model (as the image's build makes it)."""
    where = tmp_path_factory.mktemp("first-view")
    made_ahead.save(trace_pretrained(bundled, DEFAULT_TEXT), DEFAULT_TEXT, where)
    return where


def _preview():
    """A cold start's first run at the default view, alone: what app.py's loading notice draws before the model."""
    from types import SimpleNamespace

    from attnviz.ui import first_view

    first_view.preview(SimpleNamespace(url_path=""), loaded=False)


def preview_in(folder, monkeypatch) -> AppTest:
    monkeypatch.setenv("ATTNVIZ_CACHE_DIR", str(folder))
    return AppTest.from_function(_preview, default_timeout=60).run()


def test_a_cold_start_draws_the_live_pages_figures_from_the_file(made, bundled, monkeypatch, tmp_path):
    shown = preview_in(made, monkeypatch)
    assert not shown.exception, [e.value for e in shown.exception]
    assert any("The model is still loading" in i.value for i in shown.info)
    early = figures(shown)
    assert sorted(early) == ["head_detail", "head_grid"]
    monkeypatch.setenv("ATTNVIZ_CACHE_DIR", str(tmp_path))  # the live page: no file (and the model loaded)
    live = AppTest.from_file(APP, default_timeout=120).run()
    assert not live.exception, [e.value for e in live.exception]
    drawn = figures(live)
    assert early["head_grid"] == drawn["head_grid"] and early["head_detail"] == drawn["head_detail"]
    # the trace file beside them reopens every stage of the trace it was drawn from
    again, fresh = made_ahead.load_trace(made), trace_pretrained(bundled, DEFAULT_TEXT)
    for stage in ("scores", "scaled", "masked", "weights"):
        np.testing.assert_array_equal(np.asarray(again.stage(stage)), np.asarray(fresh.stage(stage)))


def _edit(path, change) -> None:
    path.write_bytes(change(path.read_bytes()))


def _restamp(folder, change) -> None:
    stamp = json.loads((folder / made_ahead.STAMP).read_text())
    change(stamp)
    (folder / made_ahead.STAMP).write_text(json.dumps(stamp))


SPOILED = {
    "no figures": lambda f: (f / made_ahead.FIGURES).unlink(),
    "no trace": lambda f: (f / made_ahead.TRACE).unlink(),
    "a figure edited": lambda f: _edit(f / made_ahead.FIGURES, lambda b: b.replace(b'"layer', b'"Layer', 1)),
    "the trace edited": lambda f: _edit(f / made_ahead.TRACE, lambda b: b[:-1] + bytes([b[-1] ^ 1])),
    "the stamp cut": lambda f: _edit(f / made_ahead.STAMP, lambda b: b[: len(b) // 2]),
    "figures too large": lambda f: _edit(f / made_ahead.FIGURES, lambda b: b + b" " * made_ahead.MAX_FIGURES_BYTES),
    "another model": lambda f: _restamp(f, lambda s: s.update(model="0" * 64)),
    "another attnviz": lambda f: _restamp(f, lambda s: s["versions"].update(attnviz="0.0.1")),
    "other code": lambda f: _restamp(f, lambda s: s.update(code="0" * 64)),
    "an older format": lambda f: _restamp(f, lambda s: s.update(format=0)),
    "another device": lambda f: _restamp(f, lambda s: s.update(device="cuda", dtype="bfloat16")),
    "another text": lambda f: _restamp(f, lambda s: s.update(text="A different sentence.")),
}


def test_a_missing_stale_corrupt_or_edited_file_is_not_used(made, tmp_path, monkeypatch):
    kept = shutil.copytree(made, tmp_path / "kept")
    assert made_ahead.load(DEFAULT_TEXT, kept) is not None  # the copy as written is taken
    for name, spoil in SPOILED.items():
        folder = shutil.copytree(made, tmp_path / name.replace(" ", "-"))
        spoil(folder)
        assert made_ahead.load(DEFAULT_TEXT, folder) is None, name
    # what a cold start's first run then draws: nothing, and no error (the loading notice and the live page follow)
    shown = preview_in(tmp_path / "a-figure-edited", monkeypatch)
    assert not shown.exception and not charts(shown) and not shown.info


def test_the_server_writes_the_file_once_after_its_first_default_trace(bundled, tmp_path, monkeypatch):
    monkeypatch.setenv("ATTNVIZ_CACHE_DIR", str(tmp_path / "cache"))
    trace = trace_pretrained(bundled, DEFAULT_TEXT)
    made_ahead.keep(trace, DEFAULT_TEXT)
    assert made_ahead.load(DEFAULT_TEXT) is not None
    written = (tmp_path / "cache" / made_ahead.STAMP).stat().st_mtime_ns
    made_ahead.keep(trace, DEFAULT_TEXT)  # a good file is there: not written again
    assert (tmp_path / "cache" / made_ahead.STAMP).stat().st_mtime_ns == written
    (tmp_path / "a-file").write_text("")  # a folder that cannot be made (as a read-only image): logged, not raised
    monkeypatch.setenv("ATTNVIZ_CACHE_DIR", str(tmp_path / "a-file" / "cache"))
    made_ahead.keep(trace, DEFAULT_TEXT)
    assert made_ahead.load(DEFAULT_TEXT) is None
