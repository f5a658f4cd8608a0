"""A cold start says it is starting before the seconds-long imports, instead of a blank page, and what a visitor's
first run imports stays light."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from helpers import APP

# Imported later than a visitor's first run: transformers with the first model load (attnviz.hf imports it there, so
# the frame's notice shows first and a process that only reads trace files never pays for it; it brings the modules
# below it, which a forward never runs), the corpus's engines, and the projections' libraries when a page asks.
LATER = ["transformers", "torch._dynamo", "torch.distributed.tensor", "sympy", "scipy", "sentence_transformers",
         "ray", "datasets", "pyarrow.parquet", "pyarrow.dataset", "sklearn", "umap"]  # fmt: skip


@pytest.fixture(scope="module")
def first_run() -> dict:
    """One fresh interpreter (this one has imported attnviz already): the entry script's first lines up to the import
    of attnviz.ui, what was imported by then and the notices drawn; then attnviz.ui itself, and what that imported."""
    probe = f"""
import json, sys
from streamlit.testing.v1 import AppTest
src = open({str(APP)!r}).read().split("from attnviz import ui")[0]
at = AppTest.from_string(src)
at.run()
seen = {{"before": [m for m in ("torch", "transformers") if m in sys.modules], "notices": [i.value for i in at.info]}}
import attnviz.ui
print(json.dumps(seen | {{"after_ui": [m for m in {LATER!r} if m in sys.modules]}}))
"""
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=180, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_a_cold_start_shows_a_notice_before_the_heavy_imports(first_run):
    assert first_run["before"] == []
    assert any("loading torch, transformers and the model" in notice for notice in first_run["notices"])


def test_a_visitors_first_run_imports_no_model_code_and_no_optional_engine(first_run):
    assert first_run["after_ui"] == []
