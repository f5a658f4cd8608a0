"""A HeadProfile and its folder: Parquet tables (heads, examples, texts, distances) and one JSON provenance record.

The record names the layout's version and holds a SHA-256 of every table and of itself, so `open_profile` refuses a
folder written by another version of the layout or edited by hand, with a message that says so, before it reads a
table.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np

from .. import checks
from ..checks.objects import path
from ..errors import InputError
from .qk_store import QKSample, check_files, sha256_file

FORMAT = "attnviz-head-profile"
VERSION = 1
TABLES = ("heads", "examples", "texts", "distances")
PROVENANCE = "provenance.json"


@dataclass(frozen=True, eq=False)
class HeadProfile:
    """Every layer x head of a model across a corpus.

    stats: statistic -> [layer, head] float64 (NaN where no text defined it); histogram [layer, head, bin]: rows by
    their largest weight; divergence [layer x head, layer x head]: mean Jensen-Shannon divergence per row (None when
    not computed); example_table: a pyarrow Table of the kept rows (`examples.example_schema`; `examples` lists them
    as dicts, made when first asked for); texts: text id -> text, for the examples; provenance: model, corpus, counts,
    settings, versions; qk: every head's sampled queries and keys (attnviz.corpus.qk_store), or None (the
    provenance's "qk_sample" says why)."""

    stats: dict
    histogram: np.ndarray
    divergence: np.ndarray | None
    example_table: object  # a pyarrow Table (pyarrow is imported only where a profile is made or read)
    texts: dict
    provenance: dict
    qk: QKSample | None = None

    n_layer = property(lambda self: self.histogram.shape[0])
    n_head = property(lambda self: self.histogram.shape[1])

    @cached_property
    def examples(self) -> list[dict]:
        """One dict per kept example: layer, head, kind, order, text_id, query, max_weight, keys, key_weights."""
        return self.example_table.to_pylist()

    @property
    def distance(self) -> np.ndarray | None:
        """[layer x head, layer x head] Jensen-Shannon distance (the square root of the divergence: a metric)."""
        return None if self.divergence is None else np.sqrt(np.clip(self.divergence, 0.0, None))

    def head_rows(self) -> list[dict]:
        groups = int(self.provenance.get("kv_groups", 1)) or 1
        return [
            {
                "layer": layer,
                "head": head,
                "kv_head": head // groups,
                **{k: float(v[layer, head]) for k, v in sorted(self.stats.items())},
                "max_weight_histogram": [int(c) for c in self.histogram[layer, head]],
            }
            for layer in range(self.n_layer)
            for head in range(self.n_head)
        ]

    def save(self, folder) -> Path:
        import pyarrow as pa
        import pyarrow.parquet as pq

        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        tables = {
            "heads": pa.Table.from_pylist(self.head_rows()),
            "examples": self.example_table,
            "texts": pa.Table.from_pylist(
                [{"text_id": i, "text": t} for i, t in sorted(self.texts.items())],
                schema=pa.schema([("text_id", pa.int64()), ("text", pa.string())]),
            ),
            "distances": pa.Table.from_pylist(self._distance_rows(), schema=_distance_schema()),
        }
        digests = {}
        for name, table in tables.items():
            pq.write_table(table, folder / f"{name}.parquet")
            digests[name] = sha256_file(folder / f"{name}.parquet")
        record = {**self.provenance, "format": FORMAT, "version": VERSION, "tables": digests}
        if self.qk is not None:
            record["qk_sample"] = self.qk.save(folder)
        record["checksum"] = _record_checksum(record)
        (folder / PROVENANCE).write_text(json.dumps(record, indent=1, sort_keys=True))
        return folder

    def _distance_rows(self) -> list[dict]:
        if self.divergence is None:
            return []
        n_head, d = self.n_head, self.divergence
        return [
            {
                "layer_a": a // n_head,
                "head_a": a % n_head,
                "layer_b": b // n_head,
                "head_b": b % n_head,
                "js_divergence": float(d[a, b]),
                "js_distance": float(np.sqrt(max(d[a, b], 0.0))),
            }
            for a in range(d.shape[0])
            for b in range(d.shape[1])
        ]


def _distance_schema():
    import pyarrow as pa

    return pa.schema(
        [(n, pa.int64()) for n in ("layer_a", "head_a", "layer_b", "head_b")]
        + [("js_divergence", pa.float64()), ("js_distance", pa.float64())]
    )


def _record_checksum(record: dict) -> str:
    body = {k: v for k, v in record.items() if k != "checksum"}
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


def check_folder(folder) -> dict:
    """The provenance record of a profile folder, after checking its layout version and that nothing was edited."""
    folder = Path(folder)
    path = folder / PROVENANCE
    if not path.is_file():
        raise InputError(f"{str(folder)!r} is not a head profile: it has no {PROVENANCE}.")
    if path.stat().st_size > 1 << 20:
        raise InputError(f"{str(path)!r} is over 1 MB: not a profile's provenance record.")
    try:
        record = json.loads(path.read_text())
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise InputError(f"{str(path)!r} is not valid JSON ({e}): the folder was edited or damaged.") from None
    if not isinstance(record, dict) or record.get("format") != FORMAT:
        raise InputError(f"{str(folder)!r} is not an attnviz head profile.")
    if record.get("version") != VERSION:
        raise InputError(
            f"{str(folder)!r} was written by another version of attnviz (profile layout "
            f"{record.get('version')!r}; this attnviz reads {VERSION}): build the profile again."
        )
    if record.get("checksum") != _record_checksum(record):
        raise InputError(f"{str(path)!r} was edited by hand (its checksum does not match): build the profile again.")
    for name in TABLES:
        table = folder / f"{name}.parquet"
        if not table.is_file() or sha256_file(table) != record["tables"].get(name):
            raise InputError(f"{str(table)!r} is missing or was changed after the profile was written: build it again.")
    return record


@checks.public(name="attnviz.open_profile")
def open_profile(folder) -> HeadProfile:
    """Reopen a saved profile (no model needed). An InputError says why when the folder is from another version of
    the layout, was edited by hand or is not a profile."""
    import pyarrow.parquet as pq

    folder = Path(path("folder", folder))
    record = check_folder(folder)
    declared = check_files(folder, record)  # the sample's files are the sizes declared, before any read
    heads = pq.read_table(folder / "heads.parquet").to_pylist()
    n_layer, n_head = int(record["n_layer"]), int(record["n_head"])
    names = [k for k in heads[0] if k not in ("layer", "head", "kv_head", "max_weight_histogram")]
    stats = {k: np.array([r[k] for r in heads], np.float64).reshape(n_layer, n_head) for k in names}
    hist = np.array([r["max_weight_histogram"] for r in heads], np.int64).reshape(n_layer, n_head, -1)
    dist = pq.read_table(folder / "distances.parquet").column("js_divergence").to_numpy()
    n = n_layer * n_head
    divergence = dist.reshape(n, n) if dist.size else None
    texts = {r["text_id"]: r["text"] for r in pq.read_table(folder / "texts.parquet").to_pylist()}
    examples = pq.read_table(folder / "examples.parquet")
    provenance = {k: v for k, v in record.items() if k not in ("format", "version", "tables", "checksum")}
    qk = None if declared is None else QKSample(folder=folder, declared=declared)
    if declared is not None:
        provenance["qk_sample"] = {k: declared[k] for k in ("samples", "texts")}
    return HeadProfile(stats, hist, divergence, examples, texts, provenance, qk=qk)
