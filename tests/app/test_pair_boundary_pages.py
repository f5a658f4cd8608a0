"""With a Second sentence in the sidebar, every page's token heatmaps mark where sentence A ends, at the position
the tokenizer's own segment ids give; and every trace page carries the provenance panel (AppTest, bundled model)."""

from __future__ import annotations

import pytest
from helpers import figures, run_page, table_rows

from attnviz import export
from attnviz.plots.pairs import BOUNDARY_COLOUR

TEXT, PAIR = "Tokenizers split unbelievable words.", "It was tired."
A_WORDS = len("Tokenizers split unbelievable words .".split())  # whole words of sentence A, by hand

#: page -> (extra session state, the figures that must carry the boundary)
PAGES = {
    "heads": ({}, ("head_grid", "head_detail")),
    "module": ({"source": "module"}, ("head_grid", "head_detail")),
    "masks": ({"causal": False}, ("mask_stages", "mask_weights")),
    "compare": ({"cmp_mode": "layers"}, ("diff_grid",)),
    "rollout": ({}, ("rollout", "raw_last")),
    "headstats": ({}, ("head_weights",)),
    "pairs": ({}, ("pair_head",)),
    "words": ({}, ("tokens_head",)),
}


@pytest.fixture(scope="module")
def boundary(bundled):
    """The first position of sentence B, from the segment ids the tokenizer gives the pair (type 1 = sentence B)."""
    return bundled.tokenizer(TEXT, PAIR)["token_type_ids"].index(1)


def boundary_lines(fig: dict) -> set[tuple[str, float]]:
    """(axis, position) of every vertical boundary line in a figure's JSON."""
    return {
        (s["xref"], s["x0"])
        for s in fig["layout"].get("shapes", [])
        if s.get("type") == "line" and s["line"]["color"] == BOUNDARY_COLOUR and s["x0"] == s["x1"]
    }


@pytest.mark.parametrize("name", list(PAGES))
def test_a_page_with_a_pair_marks_the_boundary_and_shows_provenance(name, boundary):
    state, wanted = PAGES[name]
    at = run_page(f"app_pages/{name}.py", text=TEXT, pair=PAIR, **state)
    assert not at.exception, [e.value for e in at.exception]
    figs = figures(at)
    for figure in wanted:
        found = boundary_lines(figs[figure])
        assert found, (name, figure, "no boundary line")
        assert {x for _, x in found} == {boundary - 0.5}, (name, figure, found)
    panel = [e for e in at.expander if e.label.startswith("Provenance")]
    assert len(panel) == 1, [e.label for e in at.expander]
    rows = table_rows(panel[0].table[0])
    assert {"model", "revision", "attn_implementation", "dtype", "device", "scale", "options"} <= set(rows)
    assert rows["version of torch"] == export.versions()["torch"]
    assert PAIR in rows["options"]  # the pair is part of the experiment the trace records


def test_words_page_marks_the_boundary_in_words_too(boundary):
    at = run_page("app_pages/words.py", text=TEXT, pair=PAIR)
    figs = figures(at)
    # [CLS], the words of sentence A, [SEP]: sentence B's first word comes next
    assert {x for _, x in boundary_lines(figs["words_head"])} == {A_WORDS + 2 - 0.5}
    assert A_WORDS + 2 < boundary  # "Tokenizers" is three pieces: words and tokens differ here


def test_without_a_pair_no_page_draws_a_boundary():
    for name in ("heads", "rollout"):
        at = run_page(f"app_pages/{name}.py", text=TEXT)
        assert not at.exception
        assert all(boundary_lines(f) == set() for f in figures(at).values()), name


def test_cross_attention_module_draws_no_boundary():
    at = run_page("app_pages/module.py", text=TEXT, pair=PAIR, source="module", m_cross=True)
    assert not at.exception, [e.value for e in at.exception]
    assert all(boundary_lines(f) == set() for f in figures(at).values())
