"""Partial states merge to one pass; a stopped run resumes to the same profile; a saved profile reopens and refuses a
folder from another layout version or edited by hand; the command line; Ray Data equals the in-process run."""

from __future__ import annotations

import json

import numpy as np
import pytest

from attnviz.corpus import open_corpus, open_profile, profile
from attnviz.corpus.cli import main
from attnviz.corpus.shard import run_shard
from attnviz.corpus.state import ProfileState, Settings
from attnviz.errors import InputError

TEXTS = ["the cat sat on the mat .", "a dog ran away , the dog was tired .", "hello world", "it was the cat .",
         "the mat the mat the mat", "because it was tired the cat ran away .", "the dog sat", "a cat , a dog ."]  # fmt: skip


def assert_same(a, b, exact=True):
    """exact: bit for bit; else as two processes' float32 forwards agree (threads sum in another order)."""
    check = np.testing.assert_array_equal if exact else (lambda x, y: np.testing.assert_allclose(x, y, rtol=1e-5))
    assert sorted(a.stats) == sorted(b.stats)
    for name in a.stats:
        check(a.stats[name], b.stats[name])
    np.testing.assert_array_equal(a.histogram, b.histogram)
    check(a.divergence, b.divergence)
    where = lambda e: (e["layer"], e["head"], e["kind"], e["text_id"], e["query"])  # noqa: E731
    assert [where(e) for e in a.examples] == [where(e) for e in b.examples] and a.texts == b.texts
    check(np.array([e["max_weight"] for e in a.examples]), np.array([e["max_weight"] for e in b.examples]))
    assert a.provenance["counts"] == b.provenance["counts"]


def test_two_halves_merge_to_one_pass(tiny_gpt2):
    # one text a forward: a batch's padding and shape change its texts' float rounding, and other shards make other
    # batches (batches against one text a forward: test_profile_batches.py)
    corpus, s = open_corpus(TEXTS), Settings(shard_size=3, top=4, per_interval=2, batch=1)
    halves = (
        run_shard(tiny_gpt2, corpus, s, 0)
        .merge(run_shard(tiny_gpt2, corpus, s, 1))
        .merge(run_shard(tiny_gpt2, corpus, s, 2))
    )
    whole = run_shard(tiny_gpt2, corpus, Settings(shard_size=len(TEXTS), top=4, per_interval=2, batch=1), 0)
    for name, v in whole.means.result().items():
        np.testing.assert_allclose(halves.means.result()[name], v, rtol=1e-12, err_msg=name)
    np.testing.assert_array_equal(halves.histogram.counts, whole.histogram.counts)
    np.testing.assert_allclose(halves.divergence.result(), whole.divergence.result(), rtol=1e-12)
    assert halves.examples.rows() == whole.examples.rows() and halves.counts == whole.counts
    assert whole.counts["texts"] == len(TEXTS) and len(whole.examples.rows()) > 0
    again = ProfileState.from_bytes(whole.to_bytes(), tiny_gpt2.n_layer, tiny_gpt2.n_head, whole.settings)
    assert again.examples.rows() == whole.examples.rows()


def test_a_stopped_run_resumes_to_the_same_profile_and_reopens(tiny_gpt2, tmp_path):
    one = profile(tiny_gpt2, TEXTS, shard_size=2)
    out = tmp_path / "prof"
    assert profile(tiny_gpt2, TEXTS, out=out, shard_size=2, max_shards=2) is None  # stopped after 2 of 4 shards
    assert sorted(p.name for p in (out / "shards").iterdir()) == ["shard-000000.npz", "shard-000001.npz"]
    (out / "shards" / "shard-000002.npz.tmp").write_bytes(b"half written when the run was killed")
    resumed = profile(tiny_gpt2, TEXTS, out=out, shard_size=2)
    assert_same(resumed, one)
    assert_same(open_profile(out), one)
    with pytest.raises(InputError, match="another model, corpus or settings"):
        profile(tiny_gpt2, TEXTS, out=out, shard_size=3)


def test_open_profile_refuses_another_version_and_hand_edits(tiny_gpt2, tmp_path):
    saved = profile(tiny_gpt2, TEXTS[:3], distances=False).save(tmp_path / "p")
    assert open_profile(saved).divergence is None
    record = json.loads((saved / "provenance.json").read_text())
    edited = dict(record, counts=dict(record["counts"], texts=999))
    (saved / "provenance.json").write_text(json.dumps(edited))
    with pytest.raises(InputError, match="edited by hand"):
        open_profile(saved)
    (saved / "provenance.json").write_text(json.dumps(dict(record, version=0)))
    with pytest.raises(InputError, match="another version"):
        open_profile(saved)
    (saved / "provenance.json").write_text(json.dumps(record))
    open_profile(saved)
    with open(saved / "heads.parquet", "ab") as f:
        f.write(b"\0")
    with pytest.raises(InputError, match="changed after"):
        open_profile(saved)


def test_the_command_line_profiles_a_corpus_file_with_progress(tiny_gpt2_dir, tmp_path, capsys):
    corpus = tmp_path / "texts.txt"
    corpus.write_bytes("\n".join(TEXTS[:4]).encode() + b"\n\n\xff\xfe bad bytes\n" + b"the cat " * 40 + b"\n")
    code = main(["profile", "--model", str(tiny_gpt2_dir), "--corpus", str(corpus), "--out", str(tmp_path / "p"),
                 "--shard-size", "3", "--max-tokens", "16", "--no-distances", "--batch", "2"])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 0, err
    assert "3/7 texts" in err and "tokens/s" in err and "s left" in err
    provenance = open_profile(tmp_path / "p").provenance
    counts = provenance["counts"]
    assert counts == {**counts, "texts": 5, "empty": 1, "undecodable": 1, "cut": 1}
    assert provenance["settings"]["batch"] == 2
    assert main(["profile", "--corpus", str(tmp_path / "none.txt"), "--out", str(tmp_path / "q")]) == 2
    assert "No corpus at" in capsys.readouterr().err


def test_ray_data_with_two_workers_equals_the_in_process_run(tiny_gpt2, tmp_path):
    import ray

    one = profile(tiny_gpt2, TEXTS, shard_size=3)
    on_ray = profile(tiny_gpt2, TEXTS, shard_size=3, engine="ray", workers=2)
    assert not ray.is_initialized()  # the local runtime it started is shut down
    assert_same(on_ray, one, exact=False)
    # the query-key sample: texts chosen on the workers (whose states carry no vectors) are traced again here
    assert on_ray.qk.tokens == one.qk.tokens and one.qk.n > 0
    np.testing.assert_allclose(on_ray.qk.vectors(1, 2)[0], one.qk.vectors(1, 2)[0], rtol=2**-10, atol=1e-6)
