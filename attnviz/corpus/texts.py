"""Corpora: where the texts of a profile come from, bounded in bytes and counts before any model runs.

A corpus is read twice: once by `open_corpus`, which checks every limit and fingerprints the bytes (nothing is traced
until the whole corpus passed), then text by text by `Corpus.texts(start, stop)`, which a shard of a profile, a resumed
run or a Ray worker calls for its own range. A text's id is its place in the corpus (line, file, row), so the ids of a
resumed or distributed run are the ids of one pass. Empty texts and bytes that are not UTF-8 are skipped and counted.

Kinds: a text file (one text per line), a folder of .txt files (one text per file), JSONL or Parquet with a named
text column, a Hugging Face `datasets` dataset saved to disk (when `datasets` is installed), a list of strings, or the
corpus that ships with attnviz (`DEFAULT`, offline).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from ..errors import InputError

DEFAULT = "default"
DEFAULT_FILE = Path(__file__).with_name("default_corpus.txt")
MAX_BYTES = 2 << 30  # the whole corpus, on disk
MAX_TEXTS = 1_000_000
MAX_TEXT_BYTES = 1 << 20  # one line, file or row: a longer one is an error that names it, before any work
CHUNK = 1 << 20
UNDECODABLE = object()  # a row that is not text (a JSON line that does not parse)


@dataclass(frozen=True)
class Limits:
    """What a corpus may hold; every limit is checked before the first text is traced."""

    max_bytes: int = MAX_BYTES
    max_texts: int = MAX_TEXTS
    max_text_bytes: int = MAX_TEXT_BYTES


@dataclass(frozen=True)
class Corpus:
    """A checked corpus: its kind, where it is, how many texts it holds (empty and undecodable ones included: they
    keep their ids and are counted as skipped) and a fingerprint of its bytes."""

    kind: str  # "lines", "folder", "jsonl", "parquet", "datasets", "list"
    where: str
    n_texts: int
    fingerprint: str
    column: str = "text"
    items: tuple = ()  # a list corpus's texts

    def texts(self, start: int = 0, stop: int | None = None):
        """(id, text, None) for ids start..stop-1, or (id, None, "empty" / "undecodable") for a text skipped."""
        stop = self.n_texts if stop is None else min(stop, self.n_texts)
        for i, raw in _raw(self, start, stop):
            yield (i, *_decoded(raw))

    def describe(self) -> dict:
        return {
            "kind": self.kind,
            "where": self.where,
            "texts": self.n_texts,
            "fingerprint": self.fingerprint,
            "column": self.column,
        }


def _decoded(raw) -> tuple[str | None, str | None]:
    if isinstance(raw, bytes):
        try:
            raw = raw.decode("utf-8")
        except UnicodeDecodeError:
            return None, "undecodable"
    if raw is UNDECODABLE:
        return None, "undecodable"
    if not isinstance(raw, str) or not raw.strip():
        return None, "empty"
    return raw.rstrip("\r\n"), None


def open_corpus(source=None, column: str = "text", limits: Limits | None = None) -> Corpus:
    """Check a corpus and fingerprint it. source: None or "default" (the bundled corpus), a list of strings, or a path
    (.txt file, folder of .txt files, .jsonl, .parquet, or a folder written by `datasets.Dataset.save_to_disk`)."""
    limits = Limits() if limits is None else limits
    if source is None or source == DEFAULT:
        return _lines(DEFAULT_FILE, limits, DEFAULT)
    if isinstance(source, (list, tuple)):
        return _listed(source, limits)
    path = Path(source)
    if not path.exists():
        raise InputError(f"No corpus at {str(path)!r}: give a text file, a folder of .txt files, JSONL or Parquet.")
    if path.is_dir():
        if (path / "dataset_info.json").exists() or (path / "state.json").exists():
            return _saved_dataset(path, column, limits)
        return _folder(path, limits)
    _check_size(path.stat().st_size, limits, str(path))
    suffix = path.suffix.lower()
    if suffix in (".jsonl", ".ndjson"):
        return _jsonl(path, column, limits)
    if suffix == ".parquet":
        return _parquet(path, column, limits)
    return _lines(path, limits)


def _check_size(n_bytes: int, limits: Limits, where: str) -> None:
    if n_bytes > limits.max_bytes:
        raise InputError(f"The corpus {where!r} is {n_bytes:,} bytes, over the limit of {limits.max_bytes:,} bytes.")


def _check_count(n: int, limits: Limits, where: str) -> None:
    if n == 0:
        raise InputError(f"The corpus {where!r} holds no texts.")
    if n > limits.max_texts:
        raise InputError(f"The corpus {where!r} holds {n:,} texts, over the limit of {limits.max_texts:,}.")


def _too_long(what: str, n_bytes: int, limits: Limits) -> InputError:
    return InputError(
        f"{what} is {n_bytes:,} bytes, over the limit of {limits.max_text_bytes:,} bytes for one text: split it or "
        "raise max_text_bytes."
    )


def _bounded_lines(path: Path, limits: Limits):
    """Each line's bytes (newline kept), never reading more than the per-text limit + 1 bytes into one line."""
    with open(path, "rb") as f:
        number = 0
        while True:
            line = f.readline(limits.max_text_bytes + 2)
            if not line:
                return
            number += 1
            if len(line.rstrip(b"\r\n")) > limits.max_text_bytes:
                rest = len(line)
                while not line.endswith(b"\n"):
                    line = f.readline(CHUNK)
                    rest += len(line)
                    if not line:
                        break
                raise _too_long(f"Line {number} of {str(path)!r}", rest, limits)
            yield line


def _lines(path: Path, limits: Limits, where: str | None = None) -> Corpus:
    _check_size(path.stat().st_size, limits, str(path))
    digest, n = hashlib.sha256(), 0
    for line in _bounded_lines(path, limits):
        digest.update(line)
        n += 1
        if n > limits.max_texts:
            _check_count(n, limits, str(path))
    _check_count(n, limits, str(path))
    return Corpus("lines", where or str(path), n, digest.hexdigest())


def _jsonl(path: Path, column: str, limits: Limits) -> Corpus:
    base = _lines(path, limits)
    return Corpus("jsonl", str(path), base.n_texts, base.fingerprint, column)


def _folder(path: Path, limits: Limits) -> Corpus:
    files = sorted(p for p in path.rglob("*.txt") if p.is_file())
    _check_count(len(files), limits, str(path))
    _check_size(sum(p.stat().st_size for p in files), limits, str(path))
    digest = hashlib.sha256()
    for p in files:
        if p.stat().st_size > limits.max_text_bytes:
            raise _too_long(f"The file {str(p)!r}", p.stat().st_size, limits)
        digest.update(str(p.relative_to(path)).encode() + b"\0" + p.read_bytes() + b"\0")
    return Corpus("folder", str(path), len(files), digest.hexdigest())


def _listed(items, limits: Limits) -> Corpus:
    items = tuple(items)
    _check_count(len(items), limits, "the list")
    digest, total = hashlib.sha256(), 0
    for i, t in enumerate(items):
        raw = t.encode("utf-8", "surrogateescape") if isinstance(t, str) else bytes(t)
        if len(raw) > limits.max_text_bytes:
            raise _too_long(f"Text {i} of the list", len(raw), limits)
        total += len(raw)
        digest.update(raw + b"\0")
    _check_size(total, limits, "the list")
    return Corpus("list", "a list of texts", len(items), digest.hexdigest(), items=items)


def _parquet(path: Path, column: str, limits: Limits) -> Corpus:
    import pyarrow.parquet as pq

    meta = pq.ParquetFile(path)
    names = meta.schema_arrow.names
    if column not in names:
        raise InputError(f"The Parquet file {str(path)!r} has no column {column!r}; its columns: {', '.join(names)}.")
    _check_count(meta.metadata.num_rows, limits, str(path))
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(CHUNK):
            digest.update(chunk)
    for batch in meta.iter_batches(batch_size=1024, columns=[column]):
        sizes = [
            len(v.encode("utf-8", "surrogateescape")) if isinstance(v, str) else 0 for v in batch.column(0).to_pylist()
        ]
        if max(sizes, default=0) > limits.max_text_bytes:
            raise _too_long(f"A row of {str(path)!r}", max(sizes), limits)
    return Corpus("parquet", str(path), meta.metadata.num_rows, digest.hexdigest(), column)


def _saved_dataset(path: Path, column: str, limits: Limits) -> Corpus:
    try:
        import datasets
    except ImportError:
        raise InputError("Reading a saved dataset needs the `datasets` package: pip install datasets.") from None
    ds = datasets.load_from_disk(str(path))
    if not isinstance(ds, datasets.Dataset):
        raise InputError(f"{str(path)!r} holds several splits: give the folder of one split.")
    if column not in ds.column_names:
        raise InputError(
            f"The dataset {str(path)!r} has no column {column!r}; its columns: {', '.join(ds.column_names)}."
        )
    _check_count(len(ds), limits, str(path))
    _check_size(sum(f.stat().st_size for f in path.rglob("*") if f.is_file()), limits, str(path))
    return Corpus("datasets", str(path), len(ds), str(ds._fingerprint), column)


def _raw(corpus: Corpus, start: int, stop: int):
    """(id, raw bytes or str) for a range of ids, by kind."""
    if corpus.kind == "list":
        yield from ((i, corpus.items[i]) for i in range(start, stop))
    elif corpus.kind in ("lines", "jsonl"):
        path = DEFAULT_FILE if corpus.where == DEFAULT else Path(corpus.where)
        limits = Limits(max_text_bytes=MAX_TEXT_BYTES << 12)  # checked when opened; here only read
        for i, line in enumerate(_bounded_lines(path, limits)):
            if i >= stop:
                return
            if i >= start:
                yield i, _json_text(line, corpus.column) if corpus.kind == "jsonl" else line
    elif corpus.kind == "folder":
        files = sorted(p for p in Path(corpus.where).rglob("*.txt") if p.is_file())
        yield from ((i, files[i].read_bytes()) for i in range(start, stop))
    elif corpus.kind == "parquet":
        yield from _parquet_rows(corpus, start, stop)
    else:
        import datasets

        ds = datasets.load_from_disk(corpus.where)
        yield from ((i, ds[i][corpus.column]) for i in range(start, stop))


def _json_text(line: bytes, column: str):
    """The text of one JSON line; an empty line is an empty text, a line that is not JSON is undecodable."""
    if not line.strip():
        return ""
    try:
        row = json.loads(line)
    except (UnicodeDecodeError, json.JSONDecodeError):
        return UNDECODABLE
    return row.get(column) if isinstance(row, dict) else UNDECODABLE


def _parquet_rows(corpus: Corpus, start: int, stop: int):
    import pyarrow.parquet as pq

    i = 0
    for batch in pq.ParquetFile(corpus.where).iter_batches(batch_size=1024, columns=[corpus.column]):
        values = batch.column(0).to_pylist()
        for v in values:
            if start <= i < stop:
                yield i, v
            i += 1
            if i >= stop:
                return
