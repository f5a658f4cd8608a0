"""attnviz installs as a package (`pip install .`) and works from any folder, not only inside a checkout."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_pip_install_then_trace_from_another_folder(fresh_venv, tmp_path):
    code = (
        "import attnviz, pathlib; t = attnviz.trace(attnviz.load_model(), 'hi'); "
        "print(pathlib.Path(attnviz.__file__).parent); print(t.weights.shape)"
    )
    out = fresh_venv.run(["-c", code], cwd=tmp_path, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    where, shape = out.stdout.strip().splitlines()[-2:]
    assert Path(where).is_relative_to(fresh_venv.build), where  # the installed copy, not the checkout
    assert shape == "(6, 12, 3, 3)"  # [CLS] hi [SEP] through the bundled model's 6 layers x 12 heads
    for sub in ("hf", "analysis", "plots", "ui"):
        assert (fresh_venv.build / "attnviz" / sub / "__init__.py").exists()
    for script in ("load_plotly.js", "plotly_view.js", "plotly-attnviz.min.js"):  # the dashboard's charts
        assert (fresh_venv.build / "attnviz" / "ui" / "assets" / script).exists(), script


def test_the_installed_profile_builds_its_c_sums_from_its_own_copy(fresh_venv, tmp_path):
    code = (
        f"import os; os.environ['ATTNVIZ_NATIVE_CACHE'] = {str(tmp_path / 'cache')!r}; "
        "from attnviz.corpus import native; print(native.SOURCE); print(native.library() is not None)"
    )
    out = fresh_venv.run(["-c", code], cwd=tmp_path, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    source, built = out.stdout.strip().splitlines()[-2:]
    assert Path(source).is_relative_to(fresh_venv.build) and built == "True"
    assert len(list((tmp_path / "cache").glob("profile_sums-*.so"))) == 1
    assert (fresh_venv.build / "attnviz" / "corpus" / "default_corpus.txt").exists()


def test_declared_dependencies_match_requirements_txt():
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    pinned = [line.strip() for line in (ROOT / "requirements.txt").read_text().splitlines()]
    pinned = [p for p in pinned if p and not p.startswith("#")]
    norm = lambda specs: sorted(re.sub(r"\s+", "", s).lower() for s in specs)  # noqa: E731
    assert norm(declared) == norm(pinned)
