"""A profile's query-key sample (attnviz.corpus.qk_sample) in its folder, and one head of it in 2-D.

On disk, in `qk/`: `q-LLL.npy` [head, n, d] and `k-LLL.npy` [kv_head, n, d] per layer, `allowed.npy` [layer, cells]
(the mask between each text's sampled tokens) and `tokens.parquet`. The provenance record declares every file's
shape, dtype and SHA-256 (and the record's own checksum covers that), so a file of another size is refused when the
profile opens, before anything is read, and a file whose bytes changed is refused when its layer is first read. A
head is read from a memory map: the page reads one head's n x d values of one layer, never the whole sample.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from pathlib import Path

import numpy as np

from ..analysis.geometry import Geometry, points_geometry
from ..errors import InputError, check_index
from .qk_sample import MAX_SAMPLES, Taken

FOLDER = "qk"
MAX_D_HEAD = 1_024
MAX_TOKENS_TABLE = 64 << 20  # bytes: the tokens table of MAX_SAMPLES tokens with their contexts is far below


class QKSample:
    """Every head's sampled queries and keys: `vectors(layer, head)`, `mask(layer)`, `tokens`, `scale`, `notes`."""

    def __init__(self, taken: Taken | None = None, folder: Path | None = None, declared: dict | None = None):
        self._taken, self._folder, self._declared, self._checked = taken, folder, declared, set()
        if taken is not None:
            self.tokens, self.scale, self.notes = taken.tokens, taken.scale, taken.notes
        else:
            self.tokens = _read_tokens(folder, declared)
            self.scale, self.notes = list(declared["scale"]), [list(n) for n in declared["notes"]]

    n = property(lambda self: len(self.tokens))
    n_layer = property(lambda self: len(self.scale))

    def _array(self, name: str, layer: int | None = None) -> np.ndarray:
        if self._taken is not None:
            t = self._taken
            return t.allowed if name == "allowed" else (t.q if name == "q" else t.k)[layer]
        file = "allowed.npy" if name == "allowed" else f"{name}-{layer:03d}.npy"
        if file not in self._checked:
            _check_digest(self._folder / FOLDER / file, self._declared["files"][file]["sha256"])
            self._checked.add(file)
        return _mapped(self._folder / FOLDER / file, self._declared["files"][file])

    def vectors(self, layer: int, head: int) -> tuple[np.ndarray, np.ndarray]:
        """(q [n, d], k [n, d]) float32 of one query head: its own queries, its key/value group's keys."""
        layer = check_index("layer", layer, self.n_layer)
        q = self._array("q", layer)
        head = check_index("head", head, q.shape[0])
        k = self._array("k", layer)
        return np.array(q[head], np.float32), np.array(k[head // (q.shape[0] // k.shape[0])], np.float32)

    def mask(self, layer: int) -> np.ndarray:
        """bool [n, n]: the pairs of one layer a query may attend, only ever within one text (q·k across texts is no
        attention: no head compares them)."""
        cells = np.asarray(self._array("allowed")[check_index("layer", layer, self.n_layer)], bool)
        out, at, start = np.zeros((self.n, self.n), bool), 0, 0
        blocks = self.per_text()
        if sum(m * m for m in blocks) > cells.size:
            raise InputError("The sample's mask does not match its tokens table: build the profile again.")
        for m in blocks:
            out[start : start + m, start : start + m] = cells[at : at + m * m].reshape(m, m)
            at, start = at + m * m, start + m
        return out

    def per_text(self) -> list[int]:
        ids = [t["text_id"] for t in self.tokens]
        return [sum(1 for _ in g) for g in _groups(ids)]

    def save(self, folder: Path) -> dict:
        """Write the sample into `folder`/qk and return its declaration for the provenance record."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        (folder / FOLDER).mkdir(parents=True, exist_ok=True)
        arrays = {"allowed.npy": np.asarray(self._array("allowed"), bool)}
        for y in range(self.n_layer):
            arrays[f"q-{y:03d}.npy"], arrays[f"k-{y:03d}.npy"] = self._array("q", y), self._array("k", y)
        files = {}
        for name, a in arrays.items():
            np.save(folder / FOLDER / name, np.ascontiguousarray(a), allow_pickle=False)
            files[name] = {"shape": list(a.shape), "dtype": str(a.dtype), "sha256": sha256_file(folder / FOLDER / name)}
        pq.write_table(pa.Table.from_pylist(self.tokens, schema=_token_schema()), folder / FOLDER / "tokens.parquet")
        files["tokens.parquet"] = {"rows": self.n, "sha256": sha256_file(folder / FOLDER / "tokens.parquet")}
        return {
            "samples": self.n,
            "texts": len(self.per_text()),
            "scale": self.scale,
            "notes": self.notes,
            "files": files,
        }


def _groups(ids: list):
    start = 0
    for i in range(1, len(ids) + 1):
        if i == len(ids) or ids[i] != ids[start]:
            yield ids[start:i]
            start = i


def _token_schema():
    import pyarrow as pa

    return pa.schema(
        [("text_id", pa.int64()), ("position", pa.int64()), ("token", pa.string())]
        + [(n, pa.list_(pa.string())) for n in ("before", "after")]
    )


def sha256_file(path: Path) -> str:
    """A file's SHA-256, read a MiB at a time (the profile's tables and the sample's files are checked by it)."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def _check_digest(path: Path, want: str) -> None:
    if sha256_file(path) != want:
        raise InputError(f"{str(path)!r} was changed after the profile was written: build it again.")


def _header(path: Path) -> tuple[tuple, bool, np.dtype, int]:
    with open(path, "rb") as f:
        version = np.lib.format.read_magic(f)
        read = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
        shape, fortran, dtype = read(f)
        return shape, fortran, dtype, f.tell()


def _mapped(path: Path, declared: dict) -> np.ndarray:
    shape, _, dtype, offset = _header(path)
    return np.memmap(path, dtype=dtype, mode="r", offset=offset, shape=shape)


def check_files(folder: Path, record: dict) -> dict | None:
    """The sample's declaration after checking, before any read, that it is within bounds and that every file is
    there with exactly the shape, dtype and size declared. None when the profile has no sample."""
    declared = record.get("qk_sample")
    if not isinstance(declared, dict) or "files" not in declared:
        return None
    try:
        return _checked(folder, record, declared)
    except (TypeError, ValueError, KeyError, AttributeError) as e:
        raise InputError(f"{str(folder)!r} declares a query-key sample that cannot be read ({e}).") from None


def _checked(folder: Path, record: dict, declared: dict) -> dict:
    n, n_layer, n_head = int(declared["samples"]), int(record["n_layer"]), int(record["n_head"])
    n_kv = n_head // max(1, int(record.get("kv_groups", 1)))
    if not 0 < n <= MAX_SAMPLES:
        raise InputError(f"{str(folder)!r} declares a query-key sample of {n:,} tokens: at most {MAX_SAMPLES:,}.")
    scale, notes = [float(x) for x in declared["scale"]], [[str(x) for x in row] for row in declared["notes"]]
    if len(scale) != n_layer or len(notes) != n_layer:
        raise ValueError("a scale and notes for every layer")
    wanted = {"allowed.npy": ((n_layer, None), ("bool",))}
    for y in range(n_layer):
        wanted[f"q-{y:03d}.npy"] = ((n_head, n, None), ("float16", "float32"))
        wanted[f"k-{y:03d}.npy"] = ((n_kv, n, None), ("float16", "float32"))
    files = declared["files"]
    for name, (shape, dtypes) in wanted.items():
        _check_array(folder / FOLDER / name, files.get(name) or {}, shape, dtypes, n)
    table = folder / FOLDER / "tokens.parquet"
    if not table.is_file() or table.stat().st_size > MAX_TOKENS_TABLE:
        raise InputError(f"{str(table)!r} is missing or larger than a sample's tokens table can be: build it again.")
    return {**declared, "scale": scale, "notes": notes}


def _check_array(path: Path, declared: dict, shape: tuple, dtypes: tuple, n: int) -> None:
    where = repr(str(path))
    if not path.is_file():
        raise InputError(f"{where} is missing: build the profile again.")
    want = tuple(declared.get("shape") or ())
    fits = len(want) == len(shape) and all(w == s for w, s in zip(want, shape) if s is not None)
    last = want[-1] if want else 0
    bounded = last <= (n * n if len(shape) == 2 else MAX_D_HEAD)
    if not fits or not bounded or declared.get("dtype") not in dtypes:
        raise InputError(f"{where} is declared as {want} {declared.get('dtype')}: not what the profile's shape allows.")
    found, fortran, dtype, offset = _header(path)
    size = offset + int(np.prod(want)) * np.dtype(declared["dtype"]).itemsize
    if tuple(found) != want or fortran or str(dtype) != declared["dtype"] or path.stat().st_size != size:
        raise InputError(f"{where} is not the {want} {declared['dtype']} array the profile declares: build it again.")


def _read_tokens(folder: Path, declared: dict) -> list:
    import pyarrow.parquet as pq

    path = folder / FOLDER / "tokens.parquet"
    _check_digest(path, declared["files"]["tokens.parquet"]["sha256"])
    table = pq.read_table(path)
    if table.num_rows != int(declared["samples"]):
        raise InputError(f"{str(path)!r} has {table.num_rows:,} rows, not the {int(declared['samples']):,} declared.")
    return table.to_pylist()


def sample_geometry(
    sample: QKSample, layer: int, head: int, method: str = "pca", normalised: bool = True, seed: int = 0
) -> Geometry:
    """One head's sampled queries and keys, normalised and projected as on the Query-key space page; the correlation
    of q·k with −distance counts only pairs within one text that the layer's mask allows."""
    q, k = sample.vectors(layer, head)
    return points_geometry(q, k, sample.mask(layer), sample.scale[layer], method, normalised, seed=seed)


TOP_TEXTS = 9  # colour by text: the texts with most sampled tokens get a colour, the rest are "other"


def text_groups(sample: QKSample) -> tuple[list[str], list[str]]:
    """The text of each sampled token ("text 12"), "other" past the TOP_TEXTS texts with most tokens; the same list
    for queries and keys (they are the same tokens)."""
    ids = [t["text_id"] for t in sample.tokens]
    top = {i for i, _ in Counter(ids).most_common(TOP_TEXTS)}
    labels = [f"text {i}" if i in top else "other" for i in ids]
    return labels, labels
