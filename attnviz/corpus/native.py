"""The head profile's sums over every cell in C (profile_sums.c), compiled for this machine the first time a profile
needs them.

A profile of a narrow model spends most of its own time in passes over every attention cell: PyTorch takes the row
sums in about ten (a batched product with the cell features and another for the value-weighted rows, logarithms,
reductions), each from memory; profile_sums.c reads each row once (docs/corpus.md, "One pass over each row"). It is
built with the system's C compiler (`CC`, else `cc`) into a cache folder of the user's own, keyed by the source, the
flags, the compiler and the processor's features (a cluster's home folder may be shared by machines of other kinds),
and loaded with ctypes. Without a compiler, or where the build or the load fails, `library()` is None and
attnviz.corpus.rows takes the same sums with PyTorch: the same numbers to float32 rounding. ATTNVIZ_NATIVE=0 asks for
PyTorch's sums.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import platform
import shutil
import subprocess
import tempfile
from pathlib import Path

import torch

SOURCE = Path(__file__).with_name("profile_sums.c")
#: Compiled with -ffast-math (vector logf, sums in vector lanes) but linked without it: gcc links a constructor that
#: flushes denormals to zero in the whole process into a shared library linked with -ffast-math.
COMPILE = ("-O3", "-ffast-math", "-fPIC", "-c")
NATIVE_CPU = ("-march=native",)  # tried first; without it where the compiler does not know it
LINK = ("-shared",)
BUILD_SECONDS = 60


@functools.cache
def library() -> ctypes.CDLL | None:
    """profile_sums.c built and loaded for this machine, or None (no compiler, a failed build, ATTNVIZ_NATIVE=0)."""
    if os.environ.get("ATTNVIZ_NATIVE", "1") == "0":
        return None
    compiler = shutil.which(os.environ.get("CC", "cc"))
    if compiler is None:
        return None
    try:
        lib = ctypes.CDLL(str(_built(compiler)))
    except (OSError, subprocess.SubprocessError):
        return None
    lib.window_sums.restype = ctypes.c_int
    pointer, count = ctypes.c_void_p, ctypes.c_int64
    lib.window_sums.argtypes = [pointer, *[count] * 4, pointer, *[count] * 2, *[pointer] * 7]
    lib.pair_sums.restype = None
    lib.pair_sums.argtypes = [pointer, *[count] * 3, pointer]
    return lib


def _built(compiler: str) -> Path:
    """The shared library for this source, compiler and processor: from the cache, else built into it."""
    folder = cache_folder()
    source = SOURCE.read_bytes()
    for march in (NATIVE_CPU, ()):
        key = hashlib.sha256(repr((source, compiler, _version(compiler), march, _cpu(), COMPILE, LINK)).encode())
        target = folder / f"profile_sums-{key.hexdigest()[:20]}.so"
        if target.is_file() and _ours(target):
            return target
        with tempfile.TemporaryDirectory(dir=folder) as tmp:
            obj, lib = Path(tmp) / "w.o", Path(tmp) / "w.so"
            run = lambda *args: subprocess.run(args, capture_output=True, timeout=BUILD_SECONDS)  # noqa: E731
            if run(compiler, *COMPILE, *march, str(SOURCE), "-o", str(obj)).returncode:
                continue
            if run(compiler, *LINK, str(obj), "-o", str(lib), "-lm").returncode:
                continue
            lib.chmod(0o755)
            os.replace(lib, target)  # whole or not at all: a second process building at once replaces it alike
            return target
    raise OSError("profile_sums.c did not build")


def cache_folder() -> Path:
    """ATTNVIZ_NATIVE_CACHE, else $XDG_CACHE_HOME/attnviz (~/.cache/attnviz): made readable by its owner only."""
    given = os.environ.get("ATTNVIZ_NATIVE_CACHE")
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "attnviz"
    folder = Path(given) if given else base
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    if not _ours(folder):
        raise OSError(f"{folder} is writable by others: no library is built or loaded there")
    return folder


def _ours(path: Path) -> bool:
    """Whether `path` is a file this user made that no one else may write (code is loaded from it); never where the
    system has no user ids to tell."""
    try:
        st, uid = path.stat(), os.getuid()
    except (OSError, AttributeError):
        return False
    return st.st_uid == uid and not st.st_mode & 0o022


def _version(compiler: str) -> str:
    try:
        return subprocess.run([compiler, "--version"], capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.SubprocessError):
        return ""


def _cpu() -> str:
    """The processor's features (Linux: /proc/cpuinfo's flags), else its name."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(("flags", "Features")):
                return line
    except OSError:
        pass
    return platform.processor() or platform.machine()


def usable(*tensors) -> bool:
    """Whether the kernel can take these tensors: float32 on the CPU (None: absent), and the library is there."""
    present = [t for t in tensors if t is not None]
    return all(t.device.type == "cpu" and t.dtype == torch.float32 for t in present) and library() is not None


def window_sums(
    w: torch.Tensor, f: torch.Tensor, norms: torch.Tensor | None, nlogn: torch.Tensor | None
) -> dict | None:
    """The row sums of a window (profile_sums.c's window_sums): w [G, H, Q, K]; f [Gf, Q, K, F] (Gf divides G: group
    g reads features g % Gf); norms [G, H, K] and nlogn, norms log norms (attnviz.corpus.rows.xlogx), or None. {"sums", "wlogw", "top"} and, with norms, {"usums", "ulogu"}
    (attnviz.corpus.rows.cell_sums): float32 tensors [G, H, Q, F] and [G, H, Q]; None where the C code found no
    memory for its scratch (a row and the features' key lists)."""
    G, H, Q, K = w.shape
    Gf, F = f.shape[0], f.shape[-1]
    w, ft = w.contiguous(), f.permute(0, 1, 3, 2).contiguous()  # each feature's keys side by side
    new = lambda *shape: torch.empty(shape, dtype=torch.float32)  # noqa: E731
    out = {"sums": new(G, H, Q, F), "wlogw": new(G, H, Q), "top": new(G, H, Q)}
    if norms is not None:
        norms, nlogn = norms.contiguous(), nlogn.contiguous()
        out |= {"usums": new(G, H, Q, F), "ulogu": new(G, H, Q)}
    ptr = lambda t: None if t is None else t.data_ptr()  # noqa: E731
    sums = [ptr(out.get(k)) for k in ("sums", "usums", "wlogw", "ulogu", "top")]
    failed = library().window_sums(ptr(w), G, H, Q, K, ptr(ft), Gf, F, ptr(norms), ptr(nlogn), *sums)
    return None if failed else out


def pair_sums(p: torch.Tensor) -> torch.Tensor:
    """[N, N] float64: for heads a < b of p [N, R, K] float32, the sum over rows of sum over keys of s log s for
    s = p[a] + p[b] (profile_sums.c's pair_sums: each cell's term float32, their sum float64); 0 on and below the
    diagonal."""
    p = p.contiguous()
    out = torch.zeros(p.shape[0], p.shape[0], dtype=torch.float64)
    library().pair_sums(p.data_ptr(), *p.shape, out.data_ptr())
    return out
