"""A shared link whose sentence, second sentence, model id or uploaded record holds Markdown images and links: every
piece of text the app hands Streamlit's Markdown (alerts, captions, headings, table cells, labels, help) renders
through a real CommonMark parser to text alone, and the user's text is still on the page, verbatim."""

from __future__ import annotations

import pytest
from helpers import GFM_AUTOLINKS, HOSTILE_IMAGE, HOSTILE_LINK, hostile_upload, rendered, run_page, shown

import attnviz

IMAGE, LINK = HOSTILE_IMAGE, HOSTILE_LINK
TEXT = f"The cat {IMAGE} sat {LINK} on **the** mat."
PAIR = "It was tired ![y](http://127.0.0.1:9/q.png) www.evil.example"
MARKDOWN_KINDS = ("markdown", "caption", "error", "warning", "info", "success", "title", "header", "subheader")


def markdown_bodies(at) -> list[str]:
    """Every string of the app that Streamlit reads as Markdown: element bodies, table cells, labels, help texts."""
    bodies = [str(e.value) for kind in MARKDOWN_KINDS for e in at.get(kind)]
    for table in at.get("table"):
        bodies += [str(c) for c in table.value.columns] + [str(v) for v in table.value.to_numpy().ravel()]

    def walk(node):
        for name in ("label", "help"):
            value = getattr(node, name, None)
            if isinstance(value, str):
                bodies.append(value)
        for child in (getattr(node, "children", None) or {}).values():
            walk(child)

    walk(at._tree)
    return bodies


def assert_literal(at, *expected: str) -> None:
    """No body renders to an image, a link or a bare URL GitHub would link; each `expected` text is shown as is."""
    assert not at.exception, [e.value for e in at.exception]
    seen = []
    for body in markdown_bodies(at):
        tags, text = rendered(body)
        assert not {"img", "a"} & set(tags), body
        assert not any(p.search(text) for p in GFM_AUTOLINKS), body
        seen.append(text)
    page_text = shown("\n".join(seen))
    for want in expected:
        assert want in page_text, f"{want!r} is not shown verbatim"


@pytest.mark.parametrize("page", ["heads", "export", "neuron", "masks"])
def test_the_sentence_and_the_pair_are_shown_as_text(page):
    at = run_page(f"app_pages/{page}.py", text=TEXT, pair=PAIR, nv_query=3)
    # the provenance record (summary: the pair among the options; Export: the whole record) holds them verbatim
    assert_literal(at, PAIR, *([TEXT] if page == "export" else []))


def test_compared_tokens_are_shown_as_text():
    # the bundled tokenizer cuts punctuation into one-character tokens: "**" is two "*", each its own token
    at = run_page("app_pages/compare.py", text="The cat ** sat .", cmp_text="The cat __ sat .")
    assert_literal(at, "3 (* → _), 4 (* → _)")
    assert any("(\\* → \\_)" in c.value for c in at.caption), "the tokens are escaped, not left to chance"


def test_a_model_id_in_the_load_error_is_shown_as_text():
    model = f"{IMAGE}{LINK}"
    at = run_page("app_pages/heads.py", source="hub", model=model)
    assert at.error, "a model id that cannot load says so"
    assert_literal(at, model)


def test_an_uploaded_record_is_shown_as_text(bundled):
    data = hostile_upload(attnviz.trace(bundled, "A dog ran away."), TEXT, LINK)
    at = run_page("app_pages/export.py", text="The cat sat.")
    at.file_uploader(key="ex_upload").upload("t.npz", data).run()
    assert len(at.get("table")) == 2, "the upload's own record is on the page"
    assert_literal(at, TEXT, LINK, f"saved by {IMAGE}")
