"""The README's Python blocks run as written, in order, as the cells of a notebook, in a fresh venv where attnviz
comes from `pip install .`.

Lines marked `# needs the network` name a hub id; here each such id is replaced by a local model of the same family
(the hub is unreachable from the tests): the bundled model for all-MiniLM-L6-v2, tiny random GPT-2 and T5 models.
Nothing else in a block is changed.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from fresh_install import WHERE_CELL, where_from
from nbformat.v4 import new_code_cell, new_notebook
from tiny_families import build

from attnviz.hf import bundled_model_path
from attnviz.notebook import PLOTLY_MIME

ROOT = Path(__file__).resolve().parents[1]
MARK = "# needs the network"
NOTE = 'class="attnviz-note"'  # the line attnviz.notebook writes above each page's figures


def readme_blocks() -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", (ROOT / "README.md").read_text(), re.S | re.M)


def offline(block: str, standins: dict) -> str:
    """`block` with the hub id on each line marked MARK replaced by its local stand-in."""
    lines = []
    for line in block.splitlines():
        if MARK in line:
            hits = [hub for hub in standins if f'"{hub}"' in line]
            assert hits, f"no local stand-in for the README line {line!r}: add its hub id to the standins fixture"
            for hub in hits:
                line = line.replace(f'"{hub}"', repr(str(standins[hub])))
        lines.append(line)
    return "\n".join(lines)


@pytest.fixture(scope="module")
def standins(tiny_gpt2_dir, tmp_path_factory):
    return {
        "gpt2": tiny_gpt2_dir,
        "t5-small": build("t5", tmp_path_factory.mktemp("tiny-t5")),
        "sentence-transformers/all-MiniLM-L6-v2": bundled_model_path(),
    }


def html_outputs(cell) -> list[str]:
    return [o["data"]["text/html"] for o in cell.outputs if "text/html" in o.get("data", {})]


def figure_outputs(cell) -> list[dict]:
    """The figures a cell drew, each one output in plotly's notebook type."""
    return [o["data"][PLOTLY_MIME] for o in cell.outputs if PLOTLY_MIME in o.get("data", {})]


def test_offline_replaces_only_marked_lines_and_refuses_unknown_hub_ids():
    block = 'a = load("gpt2")  # needs the network\nb = load("gpt2")'
    assert offline(block, {"gpt2": "/m"}) == "a = load('/m')  # needs the network\nb = load(\"gpt2\")"
    with pytest.raises(AssertionError, match="no local stand-in"):
        offline('load("bert-base")  # needs the network', {"gpt2": "/m"})


def test_readme_python_blocks_run_as_written_in_a_fresh_install(fresh_venv, standins, tmp_path):
    blocks = readme_blocks()
    assert len(blocks) >= 8, "the README's API section lost its Python blocks"
    assert sum(MARK in b for b in blocks) >= 3
    cells = [new_code_cell(WHERE_CELL)] + [new_code_cell(offline(b, standins)) for b in blocks]
    done = fresh_venv.execute_notebook(new_notebook(cells=cells), tmp_path)  # raises on the first failing cell

    where = where_from(done)
    assert Path(where["attnviz"]).is_relative_to(fresh_venv.build), where  # the installed copy, not the checkout
    assert Path(where["python"]).parent == fresh_venv.python.parent  # the kernel ran in the fresh venv
    cells = {b.strip().splitlines()[0]: c for b, c in zip(blocks, done.cells[1:])}
    trace_cell = next(v for k, v in cells.items() if k.startswith("trace  #"))
    figures = [f["layout"]["meta"]["figure"] for f in figure_outputs(trace_cell)]
    assert figures == ["head_grid", "head_detail", "overview"]  # a trace drew itself, as the Heads page does
    pages = next(v for k, v in cells.items() if k.startswith("for page in"))
    assert sum(NOTE in h for h in html_outputs(pages)) == 4 and len(figure_outputs(pages)) >= 4  # every page drew
    assert (tmp_path / "compare.html").read_text().count("attnviz-figure") >= 1  # figures.save wrote the page
