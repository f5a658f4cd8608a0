"""User text shown as text. Streamlit reads Markdown (and its own directives, :red[...], $math$) in alerts,
captions, titles, headers, widget labels, help texts and `st.table` cells, so a shared link whose sentence holds
`![x](https://host/p.png)` would make every viewer's browser fetch that image, and `[click](https://host)` would
put a look-alike link inside the app's own messages.

The convention: fixed copy may use Markdown; every piece of text a user controls (sentence, second sentence,
target, model id, folder, token, an uploaded record's fields, an error message that quotes any of them) goes
through `literal` on its way into a Markdown string, errors through `show_error`, tables through `record_table`.
Plain-text places need nothing (`st.dataframe`, `st.code`, `st.text`, selectbox and multiselect options).
"""

from __future__ import annotations

import re
import string

import streamlit as st

# CommonMark lets a backslash escape any ASCII punctuation, and an escaped character is always read as itself:
# escaping them all leaves no emphasis, link, image, code, heading, list, table, HTML, math or directive.
_ESCAPED = str.maketrans({c: "\\" + c for c in string.punctuation})

# GitHub's bare-URL autolinks (http://x.y, www.x.y, a@b.c) are found in the text after escapes are resolved, so
# escaping cannot stop them: an invisible word joiner inside "://", "www." and after "@" does.
_AUTOLINK = re.compile(r"(?<=:)(?=//)|(?<=www)(?=\.)|(?<=@)(?=[\w-])", re.IGNORECASE)
WORD_JOINER = "\u2060"


def literal(value) -> str:
    """`str(value)` escaped so that Streamlit's Markdown shows it character for character (`**x**` reads **x**
    with its stars) and never turns it into a link, an image or formatting."""
    return _AUTOLINK.sub(WORD_JOINER, str(value)).translate(_ESCAPED)


def show_error(error: Exception | str, level: str = "warning") -> None:
    """An attnviz error on the page as an alert (`level`: error, warning or info). Messages quote what the user
    typed (model ids, folders, positions), so they are shown literally."""
    alert = {"error": st.error, "warning": st.warning, "info": st.info}[level]
    alert(literal(error))


def record_table(rows: dict) -> None:
    """A field -> value table (a provenance record): both columns shown literally (st.table reads Markdown)."""
    st.table({"field": [literal(k) for k in rows], "value": [literal(v) for v in rows.values()]})
