"""The Corpus page over a tiny profile of the bundled model (6 texts, made once): the head finder's points are the
profile's heads table, the map's points are the MDS of its stored distances, a head's examples are its stored rows;
with no profile it says how to make one; an edited profile is refused in words."""

from __future__ import annotations

import json

import numpy as np
import pyarrow.parquet as pq
import pytest
import torch
from helpers import array, charts, figures, run_page

from attnviz.corpus import profile
from attnviz.corpus.maps import classical_mds

PAGE = "app_pages/corpus.py"
TEXTS = ["the cat sat on the mat .", "a dog ran away , the dog was tired .", "hello world", "it was the cat .",
         "the mat the mat the mat", "because it was tired the cat ran away ."]  # fmt: skip


@pytest.fixture(scope="session")
def profiles_root(bundled, tmp_path_factory):
    root = tmp_path_factory.mktemp("profiles")
    profile(bundled, TEXTS, out=root / "tiny", top=3, per_interval=1)
    return root


def _points(fig: dict, name: str = "heads"):
    (trace,) = [t for t in fig["data"] if t.get("name") == name]
    return array(trace["x"]), array(trace["y"]), np.array(trace["customdata"])


def test_the_page_shows_the_profiles_heads_map_and_examples(monkeypatch, profiles_root, bundled, bundled_eager):
    monkeypatch.setenv("ATTNVIZ_PROFILES_DIR", str(profiles_root))
    at = run_page(PAGE, cp_x="entropy", cp_y="previous", cp_head="2-5")
    assert not at.exception, [e.value for e in at.exception]
    figs = figures(at)
    heads = pq.read_table(profiles_root / "tiny" / "heads.parquet").to_pylist()  # the stored table, read apart
    x, y, where = _points(figs["corpus_head_finder"])
    np.testing.assert_allclose(x, [r["entropy"] for r in heads], rtol=1e-6)
    np.testing.assert_allclose(y, [r["previous"] for r in heads], rtol=1e-6)
    assert where.tolist() == [[r["layer"], r["head"]] for r in heads] and len(heads) == 6 * 12
    # the map: its points' distances are those of the MDS of the stored Jensen-Shannon distances
    dist = pq.read_table(profiles_root / "tiny" / "distances.parquet").column("js_distance").to_numpy()
    mx, my, _ = _points(figs["corpus_head_map"])
    coords = classical_mds(dist.reshape(72, 72))
    shown = np.stack([mx, my], 1)
    pair = lambda p: np.sqrt(((p[:, None] - p[None]) ** 2).sum(-1))  # noqa: E731
    np.testing.assert_allclose(pair(shown), pair(coords), atol=1e-5)
    # the examples: every stored row of layer 2, head 5, one small heatmap each, its query row framed and labelled,
    # traced again live (the sidebar's model is the profile's): its row holds the stored keys' weights, and it is
    # eager attention's row (transformers' own weights of the same text)
    stored = [e for e in pq.read_table(profiles_root / "tiny" / "examples.parquet").to_pylist()
              if (e["layer"], e["head"]) == (2, 5)]  # fmt: skip
    maps_ = [f for f in (sent["figure"] for sent in charts(at))
             if f["layout"]["meta"]["figure"] == "corpus_example"]  # fmt: skip
    assert len(maps_) == len(stored) > 0
    shown = {(f["layout"]["meta"]["text_id"], f["layout"]["meta"]["query"]): f for f in maps_}
    for e in stored:
        f = shown[e["text_id"], e["query"]]
        meta, heat = f["layout"]["meta"], f["data"][0]
        assert meta["live"] and heat["type"] == "heatmap"
        z, row = array(heat["z"]), meta["marked_row"]
        tokens = bundled.tokenizer.convert_ids_to_tokens(bundled.tokenizer(TEXTS[e["text_id"]])["input_ids"])
        assert heat["y"][row] == f"query {e['query']} {tokens[e['query']]}" and len(heat["x"]) == len(tokens)
        np.testing.assert_allclose(z[row, e["keys"]], e["key_weights"], rtol=1e-5, atol=1e-7)
        inputs = bundled.tokenizer(TEXTS[e["text_id"]], return_tensors="pt")
        with torch.inference_mode():
            want = bundled_eager(**inputs, output_attentions=True).attentions[2][0, 5, e["query"]].numpy()
        np.testing.assert_allclose(z[row], want, atol=2e-6)
        (frame,) = f["layout"]["shapes"]
        assert (frame["y0"], frame["y1"]) == (row - 0.5, row + 0.5)
    assert len([b for b in at.button if str(b.label) == "Open on Heads"]) == len(stored)
    assert any(str(e.label).startswith("Provenance") for e in at.expander)


def test_open_on_heads_puts_the_text_and_head_into_the_sidebar(monkeypatch, profiles_root):
    monkeypatch.setenv("ATTNVIZ_PROFILES_DIR", str(profiles_root))
    at = run_page(PAGE, cp_head="1-4")
    ex = [e for e in pq.read_table(profiles_root / "tiny" / "examples.parquet").to_pylist()
          if (e["layer"], e["head"]) == (1, 4)]  # fmt: skip
    at.button(key="cp_open_0").click().run()
    assert not at.exception
    assert at.session_state["text"] in TEXTS and at.session_state["layer"] == 1 and at.session_state["head"] == 4
    assert TEXTS.index(at.session_state["text"]) in {e["text_id"] for e in ex}


def test_no_profile_says_how_to_make_one(monkeypatch, tmp_path):
    monkeypatch.setenv("ATTNVIZ_PROFILES_DIR", str(tmp_path / "none"))
    at = run_page(PAGE)
    assert not at.exception
    assert any("No head profile" in str(i.value) for i in at.info)
    command = f"python -m attnviz profile --model bundled --out {tmp_path / 'none' / 'bundled'}"
    assert command in [c.value for c in at.code]
    assert any(str(b.label).startswith("Profile the bundled corpus") for b in at.button)


def test_an_edited_profile_is_refused_in_words(monkeypatch, profiles_root, tmp_path):
    import shutil

    shutil.copytree(profiles_root / "tiny", tmp_path / "edited")
    record = json.loads((tmp_path / "edited" / "provenance.json").read_text())
    record["model"] = "something else"
    (tmp_path / "edited" / "provenance.json").write_text(json.dumps(record))
    monkeypatch.setenv("ATTNVIZ_PROFILES_DIR", str(tmp_path))
    at = run_page(PAGE)
    assert not at.exception
    assert any("edited by hand" in str(w.value) for w in at.warning)


def test_the_chosen_heads_query_key_space_is_drawn_from_the_stored_sample(monkeypatch, profiles_root):
    monkeypatch.setenv("ATTNVIZ_PROFILES_DIR", str(profiles_root))
    at = run_page(PAGE, cp_head="2-5", cp_qk_colour="text")
    assert not at.exception, [e.value for e in at.exception]
    fig = figures(at)["query_key_space"]
    folder = profiles_root / "tiny" / "qk"
    tokens = pq.read_table(folder / "tokens.parquet").to_pylist()  # the stored sample, read apart
    assert {t["text_id"] for t in tokens} == set(range(len(TEXTS)))  # 6 short texts: every token is sampled
    drawn = [t for t in fig["data"] if t.get("hovertext") is not None]
    assert sum(len(t["hovertext"]) for t in drawn) == 2 * len(tokens)  # a query and a key of every token
    hovers = {h.split(": ")[0].split(", ", 1)[1] for t in drawn for h in t["hovertext"]}
    assert hovers == {f"text {t['text_id']}, position {t['position']}" for t in tokens}
    assert {t["name"] for t in drawn} == {f"text {i}" for i in range(len(TEXTS))}  # coloured by text
    # the correlation the page states: q.k x scale vs -distance over pairs of one text, from the stored arrays
    q, k = (np.load(folder / f"{s}-002.npy")[5].astype(np.float64) for s in "qk")
    ids = np.array([t["text_id"] for t in tokens])
    i, j = np.nonzero(ids[:, None] == ids[None])  # BERT: every key of its own text, never another text's
    score, dist = np.einsum("pd,pd->p", q[i], k[j]) / np.sqrt(32), -np.linalg.norm(q[i] - k[j], axis=1)
    for v in (score, dist):
        v -= np.array([v[i == r].mean() for r in i])
    r = np.corrcoef(score, dist)[0, 1]
    assert any(f"r = **{r:.2f}** raw" in str(c.value) and "across texts is not" in str(c.value) for c in at.caption)
