"""attnviz installs as a package (`pip install .`) and works from any folder, not only inside a checkout."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_pip_install_then_trace_from_another_folder(tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    py = venv / "bin" / "python"
    # the project's dependencies come from this environment (installing torch again would take minutes);
    # attnviz itself is built and installed by pip from the checkout
    site = subprocess.run([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    Path(site, "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    build, src = tmp_path / "build", tmp_path / "src"  # a clean copy: no stale build/ folder can leak in
    skip = shutil.ignore_patterns(".venv", ".git", "build", "test-output", "*.egg-info", "__pycache__", "bench")
    shutil.copytree(ROOT, src, ignore=skip)
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
                    "--target", str(build), str(src)], check=True, cwd=tmp_path, timeout=300)  # fmt: skip
    Path(site, "attnviz-under-test.pth").write_text(str(build) + "\n")
    code = (
        "import attnviz, pathlib; t = attnviz.trace(attnviz.load_model(), 'hi'); "
        "print(pathlib.Path(attnviz.__file__).parent); print(t.weights.shape)"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {"HF_HUB_OFFLINE": "1"}
    out = subprocess.run([py, "-c", code], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    where, shape = out.stdout.strip().splitlines()[-2:]
    assert Path(where).is_relative_to(build), where  # the installed copy, not the checkout
    assert shape == "(6, 12, 3, 3)"  # [CLS] hi [SEP] through the bundled model's 6 layers x 12 heads
    for sub in ("hf", "analysis", "plots", "ui"):
        assert (build / "attnviz" / sub / "__init__.py").exists()


def test_declared_dependencies_match_requirements_txt():
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    pinned = [line.strip() for line in (ROOT / "requirements.txt").read_text().splitlines()]
    pinned = [p for p in pinned if p and not p.startswith("#")]
    norm = lambda specs: sorted(re.sub(r"\s+", "", s).lower() for s in specs)  # noqa: E731
    assert norm(declared) == norm(pinned)
