"""docs/notebook.ipynb, the example notebook: kept without outputs in the repository, and every cell runs in a fresh
venv where attnviz comes from `pip install .`, each view cell drawing an attnviz output."""

from __future__ import annotations

from pathlib import Path

import nbformat
from fresh_install import WHERE_CELL, where_from
from nbformat.v4 import new_code_cell

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "docs" / "notebook.ipynb"
VIEW = 'class="attnviz-output"'


def test_the_example_notebook_is_stored_without_outputs():
    nb = nbformat.read(NOTEBOOK, as_version=4)
    nbformat.validate(nb)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code and all(c.outputs == [] and c.execution_count is None for c in code)


def test_the_example_notebook_runs_in_a_fresh_install_and_draws_its_views(fresh_venv, tmp_path):
    nb = nbformat.read(NOTEBOOK, as_version=4)
    nb.cells.insert(0, new_code_cell(WHERE_CELL))
    done = fresh_venv.execute_notebook(nb, tmp_path)  # raises on the first failing cell
    assert Path(where_from(done)["attnviz"]).is_relative_to(fresh_venv.build)
    code = [c for c in done.cells[1:] if c.cell_type == "code"]
    assert all(c.execution_count for c in code)
    views = [c for c in code if "trace" == c.source.strip() or "attnviz.show(" in c.source]
    assert len(views) == 4
    for cell in views:  # each view cell's one output is attnviz's HTML (plotly.js inside it, no address)
        (out,) = [o for o in cell.outputs if o.output_type == "execute_result"]
        assert VIEW in out["data"]["text/html"] and "<script src" not in out["data"]["text/html"]
    rows = next(c for c in code if "weights.shape" in c.source).outputs[0]["data"]["text/plain"]
    assert "(12, 13, 13)" in rows and "array([1., 1.," in rows  # 12 heads x 13 tokens; rows sum to 1
