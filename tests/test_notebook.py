"""docs/notebook.ipynb, the example notebook: kept without outputs in the repository, and every cell runs in a fresh
venv where attnviz comes from `pip install .`, each view cell drawing an attnviz output."""

from __future__ import annotations

from pathlib import Path

import nbformat
from fresh_install import where_from

from attnviz.notebook import PLOTLY_MIME

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "docs" / "notebook.ipynb"


def test_the_example_notebook_is_stored_without_outputs():
    nb = nbformat.read(NOTEBOOK, as_version=4)
    nbformat.validate(nb)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code and all(c.outputs == [] and c.execution_count is None for c in code)


def test_the_example_notebook_runs_in_a_fresh_install_and_draws_its_views(fresh_venv, executed_notebook):
    done = nbformat.read(executed_notebook, as_version=4)  # nbconvert --execute raised on any failing cell
    assert Path(where_from(done)["attnviz"]).is_relative_to(fresh_venv.build)
    code = [c for c in done.cells[1:] if c.cell_type == "code"]
    assert all(c.execution_count for c in code)
    assert not [o for c in code for o in c.outputs if o.get("name") == "stderr"]  # no "IProgress not found" box
    views = [c for c in code if "trace" == c.source.strip() or "attnviz.show(" in c.source]
    assert len(views) == 4
    for cell in views:  # each figure its own output in plotly's type, a static picture beside it, no script
        figures = [o["data"] for o in cell.outputs if PLOTLY_MIME in o.get("data", {})]
        assert figures and all(o.output_type == "display_data" for o in cell.outputs)
        for data in figures:
            spec = data[PLOTLY_MIME]
            assert spec["data"] and spec["layout"]["meta"]["figure"] and spec["config"]["displaylogo"] is False
            assert "<svg" in data["text/html"] and "<script" not in data["text/html"]
        assert not any("<script" in o["data"].get("text/html", "") for o in cell.outputs)
    rows = next(c for c in code if "weights.shape" in c.source).outputs[0]["data"]["text/plain"]
    assert "(12, 13, 13)" in rows and "array([1., 1.," in rows  # 12 heads x 13 tokens; rows sum to 1
