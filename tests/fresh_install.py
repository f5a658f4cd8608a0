"""A fresh virtual environment with attnviz built and installed by pip from a clean copy of the checkout.

The project's dependencies come from the test environment through a .pth file (the same pinned versions:
torch==2.13.0, transformers, plotly, nbclient, ipykernel ...; installing torch again would take minutes);
attnviz itself is only importable from what `pip install` built, never from the checkout.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]

# Runs inside the fresh venv: execute a notebook with nbclient; its kernel is this venv's python (ipykernel's
# own kernel spec names sys.executable).
RUN_NOTEBOOK = """
import sys, nbformat, nbclient
nb = nbformat.read(sys.argv[1], as_version=4)
nbclient.NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": sys.argv[3]}}).execute()
nbformat.write(nb, sys.argv[2])
"""


@dataclass(frozen=True)
class FreshVenv:
    python: Path
    build: Path  # where pip put attnviz

    def env(self) -> dict:
        return {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {"HF_HUB_OFFLINE": "1"}

    def run(self, args, cwd: Path, timeout: int = 600) -> subprocess.CompletedProcess:
        return subprocess.run([self.python, *args], capture_output=True, text=True, cwd=cwd, env=self.env(),
                              timeout=timeout)  # fmt: skip

    def execute_notebook(self, nb, folder: Path) -> nbformat.NotebookNode:
        """Run every cell of `nb` in a kernel of this venv (cwd `folder`); return the notebook with its outputs."""
        src, out = folder / "in.ipynb", folder / "out.ipynb"
        nbformat.write(nb, src)
        done = self.run(["-c", RUN_NOTEBOOK, str(src), str(out), str(folder)], cwd=folder)
        assert done.returncode == 0, done.stderr[-4000:]
        return nbformat.read(out, as_version=4)

    def nbconvert_execute(self, nb, folder: Path) -> Path:
        """`jupyter nbconvert --to notebook --execute` of `nb` in this venv (cwd `folder`), as a course would run a
        handout: returns the executed notebook's file."""
        src = folder / "notebook.ipynb"
        nbformat.write(nb, src)
        args = ["-m", "nbconvert", "--to", "notebook", "--execute", "--ExecutePreprocessor.timeout=300",
                "--output", "executed.ipynb", str(src)]  # fmt: skip
        done = self.run(args, cwd=folder)
        assert done.returncode == 0, done.stderr[-4000:]
        return folder / "executed.ipynb"


def build(tmp_path: Path) -> FreshVenv:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    py = venv / "bin" / "python"
    site = subprocess.run([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    Path(site, "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    out, src = tmp_path / "build", tmp_path / "src"  # a clean copy: no stale build/ folder can leak in
    skip = shutil.ignore_patterns(".venv", ".git", "build", "test-output", "*.egg-info", "__pycache__", "bench")
    shutil.copytree(ROOT, src, ignore=skip)
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
                    "--target", str(out), str(src)], check=True, cwd=tmp_path, timeout=300)  # fmt: skip
    Path(site, "attnviz-under-test.pth").write_text(str(out) + "\n")
    return FreshVenv(py, out)


def where_from(nb: nbformat.NotebookNode) -> dict:
    """{"attnviz": folder, "python": interpreter} printed by a first cell added by the tests."""
    return json.loads(nb.cells[0].outputs[0]["text"])


WHERE_CELL = "import attnviz, json, pathlib, sys\nprint(json.dumps({'attnviz': str(pathlib.Path(attnviz.__file__).parent), 'python': sys.executable}))"
