"""The bench environment: bench/.venv-bench = the project's .venv (via a .pth file) + bench-only packages.

`python -m bench` creates it on first use, installs bench/requirements-bench.txt and bertviz (--no-deps),
then re-runs itself inside it. The project's requirements never change; the dashboard server the
browser benches start always runs on the project's own .venv interpreter.
"""

from __future__ import annotations

import hashlib
import os
import site
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BENCH_ENV = ROOT / "bench" / ".venv-bench"
REQS = ROOT / "bench" / "requirements-bench.txt"
NO_DEPS = ["bertviz==1.4.1"]
STAMP = BENCH_ENV / ".bench-installed"


def inside() -> bool:
    return Path(sys.prefix).resolve() == BENCH_ENV.resolve()


def python() -> Path:
    return BENCH_ENV / "bin" / "python"


def _wanted() -> str:
    return hashlib.sha256((REQS.read_text() + "\n".join(NO_DEPS)).encode()).hexdigest()


def ensure(log=print) -> Path:
    """Create or update the bench environment; return its python. Raises CalledProcessError on failure."""
    if not python().exists():
        base = getattr(sys, "_base_executable", None) or sys.executable
        log(f"[bench] creating {BENCH_ENV.relative_to(ROOT)} (once)")
        subprocess.run([base, "-m", "venv", str(BENCH_ENV)], check=True)
    # let the bench env import everything the project's environment has (torch, transformers, streamlit...)
    main_sites = [p for p in site.getsitepackages() if Path(p).exists()]
    pyver = f"python{sys.version_info.major}.{sys.version_info.minor}"
    pth = BENCH_ENV / "lib" / pyver / "site-packages" / "_attnviz_project.pth"
    pth.write_text("\n".join(main_sites) + "\n")
    if not STAMP.exists() or STAMP.read_text() != _wanted():
        log("[bench] installing bench-only packages (bertviz, psutil, matplotlib, profilers)")
        pip = [str(python()), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
        subprocess.run(pip + ["-r", str(REQS)], check=True)
        subprocess.run(pip + ["--no-deps", *NO_DEPS], check=True)
        STAMP.write_text(_wanted())
    return python()


def reexec_inside(argv: list[str]) -> None:
    """Replace this process with `python -m bench argv` inside the bench environment."""
    py = str(python())
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    os.chdir(ROOT)
    os.execve(py, [py, "-m", "bench", *argv], env)
