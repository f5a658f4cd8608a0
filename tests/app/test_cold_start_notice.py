"""A cold start says it is starting before the seconds-long imports, instead of a blank page."""

from __future__ import annotations

import subprocess
import sys

from helpers import APP


def test_a_cold_start_shows_a_notice_before_the_heavy_imports():
    # a fresh interpreter (this one has imported attnviz already): run the entry script's first lines up to the import
    # of attnviz.ui, and check that by then the notice was drawn and neither torch nor transformers was imported
    probe = f"""
import sys
from streamlit.testing.v1 import AppTest
src = open({str(APP)!r}).read().split("from attnviz import ui")[0]
at = AppTest.from_string(src)
at.run()
print("torch" in sys.modules, "transformers" in sys.modules, [i.value for i in at.info])
"""
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True)
    torch_in, transformers_in, notices = out.stdout.strip().split(" ", 2)
    assert (torch_in, transformers_in) == ("False", "False")
    assert "loading torch, transformers and the model" in notices
