"""Corpora of every kind, bounded before work: skipped texts counted, bad input refused with attnviz's own message."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from attnviz.corpus import Limits, open_corpus
from attnviz.corpus.texts import DEFAULT_FILE
from attnviz.errors import InputError


def entries(corpus, start=0, stop=None):
    return [(i, t, why) for i, t, why in corpus.texts(start, stop)]


def test_a_text_file_counts_empty_and_undecodable_lines_and_keeps_their_ids(tmp_path):
    path = tmp_path / "c.txt"
    path.write_bytes(b"first text\n\n  \nbad \xff\xfe bytes\nlast text\r\n")
    corpus = open_corpus(path)
    assert corpus.n_texts == 5
    assert entries(corpus) == [(0, "first text", None), (1, None, "empty"), (2, None, "empty"),
                               (3, None, "undecodable"), (4, "last text", None)]  # fmt: skip
    assert entries(corpus, 3, 5)[1] == (4, "last text", None)
    path.write_bytes(path.read_bytes() + b"one more\n")
    assert open_corpus(path).fingerprint != corpus.fingerprint


def test_folders_jsonl_parquet_and_a_saved_dataset(tmp_path):
    import datasets

    (tmp_path / "f").mkdir()
    for name, text in (("b.txt", "second"), ("a.txt", "first")):
        (tmp_path / "f" / name).write_text(text)
    assert [t for _, t, _ in open_corpus(tmp_path / "f").texts()] == ["first", "second"]
    lines = [json.dumps({"body": "one"}), "not json", json.dumps({"body": ""}), json.dumps({"body": "two"})]
    (tmp_path / "c.jsonl").write_text("\n".join(lines) + "\n")
    got = entries(open_corpus(tmp_path / "c.jsonl", column="body"))
    assert got == [(0, "one", None), (1, None, "undecodable"), (2, None, "empty"), (3, "two", None)]
    pq.write_table(pa.table({"body": ["alpha", None, "gamma"], "n": [1, 2, 3]}), tmp_path / "c.parquet")
    assert entries(open_corpus(tmp_path / "c.parquet", column="body"), 1) == [(1, None, "empty"), (2, "gamma", None)]
    with pytest.raises(InputError, match="has no column 'text'; its columns: body, n"):
        open_corpus(tmp_path / "c.parquet")
    datasets.Dataset.from_dict({"text": ["saved one", "saved two"]}).save_to_disk(str(tmp_path / "ds"))
    assert [t for _, t, _ in open_corpus(tmp_path / "ds").texts()] == ["saved one", "saved two"]


def test_limits_refuse_before_any_work(tmp_path):
    empty = tmp_path / "empty.txt"
    empty.write_bytes(b"")
    with pytest.raises(InputError, match="holds no texts"):
        open_corpus(empty)
    huge = tmp_path / "huge.txt"
    with open(huge, "wb") as f:
        f.write(b"a short line\n")
        f.write(b"x" * (100 << 20))  # a 100 MB line
        f.write(b"\n")
    with pytest.raises(InputError, match=r"Line 2 of .* is 104,857,601 bytes, over the limit of 1,048,576"):
        open_corpus(huge)
    with pytest.raises(InputError, match="over the limit of 10 bytes"):
        open_corpus(["short", "a longer text than ten bytes"], limits=Limits(max_text_bytes=10))
    with pytest.raises(InputError, match="3 texts, over the limit of 2"):
        open_corpus(["a", "b", "c"], limits=Limits(max_texts=2))
    with pytest.raises(InputError, match="over the limit of 100 bytes"):
        open_corpus(DEFAULT_FILE, limits=Limits(max_bytes=100))
    with pytest.raises(InputError, match="No corpus at"):
        open_corpus(tmp_path / "missing.txt")


def test_the_default_corpus_ships_with_the_package():
    corpus = open_corpus()
    assert 300 <= corpus.n_texts <= 1000 and DEFAULT_FILE.stat().st_size < 100_000
    assert all(t for _, t, _ in corpus.texts())
