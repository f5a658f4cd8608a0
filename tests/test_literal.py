"""User text reaches Streamlit's Markdown only escaped (attnviz.ui.literal), and the pages keep to that convention.

The rendering check uses markdown-it-py (a CommonMark parser, installed with streamlit) with GitHub's tables and
strikethrough on, and GitHub's bare-URL autolink rules written from the GFM spec: a literal string must come out as
one paragraph of exactly its own text, with no image, link or formatting.
"""

from __future__ import annotations

import ast
import re
import string
from pathlib import Path

import pytest
from helpers import GFM_AUTOLINKS, rendered

from attnviz.ui import literal
from attnviz.ui.literal import WORD_JOINER

ROOT = Path(__file__).resolve().parents[1]

HOSTILE = {
    "image": "![x](http://127.0.0.1:9/p.png)",
    "link": "[click](http://evil.example/)",
    "reference link": "[click][r]\n\n[r]: http://evil.example/r",
    "autolink": "<http://evil.example/auto>",
    "bare url": "see http://127.0.0.1:9/bare and https://evil.example/s",
    "www": "WWW.evil.example and www.evil.example/x",
    "email": "mail me: someone@evil.example or mailto:x@evil.example",
    "emphasis": "**x** __y__ *z* _w_ ~~s~~ `code` ``two``",
    "html": '<img src="http://127.0.0.1:9/h.png"> <a href="http://evil.example/h">h</a> &amp; &lt;b&gt;',
    "blocks": "# head\n- item\n1. one\n> quote\n---\n    indented\n```\nfence\n```",
    "table": "a | b\n--|--\n1 | 2",
    "streamlit directives": ":red[red] :material/home: :smile: $x^2$ $$y$$",
    "backslashes": "a\\b \\*not\\* \\\\",
    "token": "**x**",
}


def squeeze(s: str) -> str:
    return " ".join(s.replace(WORD_JOINER, "").split())


def test_every_markdown_special_is_escaped():
    for c in string.punctuation:
        assert literal(c) == "\\" + c
    mixed = "".join(HOSTILE.values())
    # every ASCII punctuation character of the output is either an escape's backslash or the escaped character
    unescaped = re.sub(r"\\[\s\S]", "", literal(mixed))
    assert not any(c in string.punctuation for c in unescaped), unescaped
    assert re.sub(r"\\([\s\S])", r"\1", literal(mixed)).replace(WORD_JOINER, "") == mixed
    assert literal("plain words 42") == "plain words 42" and literal(3.5) == "3\\.5"


@pytest.mark.parametrize("name", list(HOSTILE))
def test_literal_text_renders_as_itself_and_nothing_else(name):
    text = HOSTILE[name]
    raw_tags, raw_text = rendered(text)
    # each sample means something unescaped (Streamlit's own directives only to Streamlit: the browser test's part)
    assert (set(raw_tags) - {"p", "br"} or squeeze(raw_text) != squeeze(text)
            or any(p.search(text) for p in GFM_AUTOLINKS) or name == "streamlit directives"), name  # fmt: skip
    tags, shown = rendered(literal(text))
    assert set(tags) <= {"p"} and tags.count("p") <= text.count("\n\n") + 1, tags
    assert squeeze(shown) == squeeze(text)
    for pattern in GFM_AUTOLINKS:
        assert not pattern.search(shown), f"{pattern.pattern} would autolink in {shown!r}"


def test_a_token_reads_verbatim():
    tags, shown = rendered(literal("**x**"))
    assert tags == ["p"] and shown.strip() == "**x**"


# --- the convention: pages and the UI layer pass user text through literal / show_error / record_table ----------

#: Streamlit calls whose text (or label / help) is read as Markdown.
MARKDOWN_TEXT = {"markdown", "caption", "error", "warning", "info", "success", "toast", "title", "header",
                 "subheader", "write", "expander", "popover", "metric", "badge", "tabs"}  # fmt: skip
WIDGETS = {"button", "download_button", "checkbox", "toggle", "radio", "selectbox", "multiselect", "slider",
           "select_slider", "segmented_control", "pills", "text_input", "text_area", "number_input", "file_uploader",
           "color_picker", "date_input", "time_input", "page_link"}  # fmt: skip
#: Names that hold user-controlled text in this codebase: the sentences, tokens, model ids, notes, error messages.
USER_TEXT = re.compile(
    r"\b(e|err|text|pair|target|tokens|key_tokens|token|labels|label_a|label_b|model_name|note|notes|record|rows|"
    r"path|shown|other)\b|\.(name|label)\b"
)
SECTIONS = {"section", "show"}
ESCAPERS = {"literal", "show_error", "record_table"}
#: Reviewed exceptions: (file, expression) whose name looks like user text but which is the app's own copy.
OWN_COPY = {
    ("heads.py", "note"),  # plots.heatmaps.stage_note: a fixed sentence with numbers
    ("module.py", "note"),  # the same
    ("before_softmax.py", "text"),  # analysis.scale_site.scale_site: a fixed sentence with the scale
    ("scaling.py", "text"),  # analysis.scaling.scale_label: the scale as a number or 1/√d
    ("scaling.py", "note"),  # plots.distributions.row_saturation_note: a fixed sentence
    ("sidebar.py", "note"),  # state.cut_notes: which field was cut and its limit, no user text
}


def _escaped(node: ast.AST) -> bool:
    f = node.func if isinstance(node, ast.Call) else None
    return f is not None and (getattr(f, "attr", None) or getattr(f, "id", None)) in ESCAPERS


def _unescaped_user_text(node: ast.AST) -> list[str]:
    """Source of every user-text expression in `node` that reaches the string unescaped."""
    if _escaped(node) or isinstance(node, ast.Constant | ast.Lambda):
        return []
    if isinstance(node, ast.JoinedStr | ast.BinOp | ast.IfExp | ast.BoolOp):
        parts = node.values if isinstance(node, ast.JoinedStr | ast.BoolOp) else ast.iter_child_nodes(node)
        return [s for v in parts for s in _unescaped_user_text(v)]
    if isinstance(node, ast.FormattedValue | ast.NamedExpr):
        return _unescaped_user_text(node.value)
    if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "join":
        return [s for a in node.args for s in _unescaped_user_text(a)]
    if isinstance(node, ast.GeneratorExp | ast.ListComp):
        return _unescaped_user_text(node.elt)
    source = ast.unparse(node)
    return [source] if USER_TEXT.search(source) else []


def _violations(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute | ast.Name):
            continue
        name = getattr(node.func, "attr", None) or node.func.id
        if name == "table" and path.name != "literal.py":
            found.append(f"{path.name}:{node.lineno}: st.table reads Markdown in its cells: use ui.record_table")
        if name in MARKDOWN_TEXT:
            texts = [*node.args, *(k.value for k in node.keywords if k.arg in ("body", "label", "help", "value"))]
        elif name in SECTIONS:  # ui.section(fig, title, why, ...) and the pages' own show(...) around it
            texts = node.args[1:3]
        elif name in WIDGETS:
            texts = [*node.args[:1], *(k.value for k in node.keywords if k.arg in ("label", "help", "placeholder"))]
        else:
            continue
        user = [s for t in texts for s in _unescaped_user_text(t) if (path.name, s) not in OWN_COPY]
        found += [f"{path.name}:{node.lineno}: {name}(... {s} ...)" for s in user]
    return found


def test_pages_pass_user_text_through_literal():
    files = sorted((ROOT / "app_pages").glob("*.py")) + sorted((ROOT / "attnviz" / "ui").glob("*.py"))
    assert len(files) > 15
    found = [v for f in files for v in _violations(f)]
    assert found == [], "user text reaches Markdown unescaped:\n" + "\n".join(found)


def test_the_convention_check_catches_what_it_should(tmp_path):
    page = tmp_path / "page.py"
    page.write_text(
        "st.warning(str(e))\nst.caption(f'a = {src.label}')\nst.table(rows)\nst.subheader(f'{labels[q]} here')\n"
        "st.info(note)\nst.slider(f'{tr.tokens[0]}', 0, 1)\nshow(fig, 'title', f'row ({tr.tokens[q]})', 'key')\n"
        "st.caption(f'ok {ui.literal(src.label)} {layer}')\nui.show_error(e)\nst.warning(ui.literal(note))\n"
    )
    assert [v.split(":")[1] for v in _violations(page)] == ["1", "2", "3", "4", "5", "6", "7"]
