"""Classical MDS recovers a known configuration's distances; the profile folders listed under a root."""

from __future__ import annotations

import numpy as np

from attnviz.corpus.maps import classical_mds, profile_folders


def pairwise(points: np.ndarray) -> np.ndarray:
    return np.sqrt(((points[:, None, :] - points[None, :, :]) ** 2).sum(-1))


def test_mds_recovers_a_plane_configuration_exactly():
    points = np.random.default_rng(0).normal(size=(30, 2)) * [3.0, 1.0]
    coords = classical_mds(pairwise(points))
    np.testing.assert_allclose(pairwise(coords), pairwise(points), atol=1e-9)


def test_mds_of_a_solid_configuration_is_its_two_principal_components():
    points = np.random.default_rng(1).normal(size=(25, 3)) * [5.0, 2.0, 0.3]
    centred = points - points.mean(0)
    u, s, _ = np.linalg.svd(centred, full_matrices=False)  # principal components, computed apart from MDS
    coords = classical_mds(pairwise(points))
    np.testing.assert_allclose(pairwise(coords), pairwise(u[:, :2] * s[:2]), atol=1e-9)
    again = classical_mds(pairwise(points[::-1]))[::-1]  # the same points in another order: the same picture
    np.testing.assert_allclose(again, coords, atol=1e-9)


def test_profile_folders_lists_only_folders_with_a_record(tmp_path):
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "provenance.json").write_text("{}")
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "provenance.json").write_text("{}")
    (tmp_path / "empty").mkdir()
    (tmp_path / "file.txt").write_text("x")
    assert [p.name for p in profile_folders(tmp_path)] == ["a", "b"]
    assert profile_folders(tmp_path / "missing") == []


def test_a_heads_examples_keep_room_for_every_interval():
    from attnviz.corpus import HeadProfile
    from attnviz.corpus.examples import examples_from_rows
    from attnviz.corpus.maps import head_examples

    row = lambda kind, order, w: {"layer": 0, "head": 1, "kind": kind, "order": order, "text_id": 0, "query": 0,  # noqa: E731
                                  "max_weight": w, "keys": [0], "key_weights": [w]}  # fmt: skip
    rows = [row("strongest", i, 0.9 - i / 100) for i in range(10)]
    rows += [row(f"interval {b}", i, b / 5 + 0.1 - i / 100) for b in range(5) for i in range(3)]
    rows += [{**row("strongest", 0, 1.0), "head": 0}]  # another head's row
    prof = HeadProfile({}, np.zeros((1, 2, 20), int), None, examples_from_rows(rows), {0: "a text"}, {})
    got = head_examples(prof, 0, 1, most=12)
    assert [(e["kind"], e["order"]) for e in got[:6]] == [("strongest", i) for i in range(6)]
    assert sorted(e["kind"] for e in got[6:11]) == [f"interval {b}" for b in range(5)]  # one of each interval first
    assert len(got) == 12 and all(e["text"] == "a text" and e["head"] == 1 for e in got)


def test_a_profile_that_kept_no_example_has_an_empty_table_of_the_schema():
    from attnviz.corpus import HeadProfile
    from attnviz.corpus.examples import Examples, example_schema
    from attnviz.corpus.maps import head_examples

    table = Examples.empty(2, 3).table()  # no row was ever offered: every slot empty
    assert table.num_rows == 0 and table.schema.equals(example_schema())
    prof = HeadProfile({}, np.zeros((2, 3, 20), int), None, table, {}, {})
    assert prof.examples == [] and head_examples(prof, 1, 2) == []
