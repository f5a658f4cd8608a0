"""A shared link (or an uploaded file) whose user text holds Markdown images and links, in a real Chromium: no page
fetches anything from the links' hosts, none draws an image or a link to them, and the text is shown as text.

The hosts are a loopback port nothing listens on and a reserved .example name: a request would only be counted,
never answered."""

from __future__ import annotations

import re
from urllib.parse import urlencode

import pytest
from helpers import HOSTILE_IMAGE, HOSTILE_LINK, hostile_upload
from tiny_families import build

import attnviz

# a URL on either host (the app's own URLs carry the text in their query, percent-encoded, so never "//host")
ON_HOSTS = r"//(127\.0\.0\.1:9(?![0-9])|([\w-]+\.)*evil\.example)"
IMAGE, LINK = HOSTILE_IMAGE, HOSTILE_LINK
TEXT = f"The cat {IMAGE} sat {LINK} on the mat."
PAIR = f"It was tired {IMAGE} {LINK} http://evil.example/bare www.evil.example"
MODEL = "![m](http://127.0.0.1:9/m.png)[click](http://evil.example/m)"
PAGES = ["", "scaling", "masks", "module", "headstats", "rollout", "neuron", "scores", "words", "pairs", "compare",
         "export"]  # fmt: skip

# Every attribute through which an element can load or link to a URL, read from the live DOM (Plotly's SVG
# links use xlink:href); form values are left out, they hold the user's text by design.
URL_ATTRIBUTES_JS = """pattern => Array.from(document.querySelectorAll('*')).flatMap(el =>
    Array.from(el.attributes)
        .filter(a => /^(src|srcset|href|xlink:href|poster|data|action|style|background)$/i.test(a.name))
        .filter(a => new RegExp(pattern, 'i').test(a.value))
        .map(a => `<${el.tagName.toLowerCase()} ${a.name}="${a.value}">`))"""


def watch(tab) -> list[str]:
    """The URLs of every request the page (and its frames) makes to the links' hosts, from now on."""
    seen = []
    tab.page.on("request", lambda r: seen.append(r.url) if re.search(ON_HOSTS, r.url, re.IGNORECASE) else None)
    return seen


def open_panels(tab) -> None:
    """Open the provenance expanders, so their tables are rendered and laid out like everything else."""
    for summary in tab.page.locator("[data-testid='stMain'] [data-testid='stExpander'] summary").all():
        if "rovenance" in summary.inner_text():
            summary.click()
    tab.page.wait_for_timeout(500)  # an image in a table cell would be requested as soon as it is laid out


def assert_shown_as_text(tab, requests: list[str], *texts: str, where: str = "body") -> None:
    for _ in range(40):  # a table in a just-opened expander is drawn a moment later on a busy host
        shown = tab.page.locator(where).inner_text()
        if all(text in shown for text in texts):
            break
        tab.page.wait_for_timeout(500)
    assert requests == [], f"the page fetched {requests}"
    assert tab.page.evaluate(URL_ATTRIBUTES_JS, ON_HOSTS) == []
    for text in texts:
        assert text in shown, f"{text!r} is not on the page as text"
    assert "\\!\\[" not in shown and "\\[click" not in shown, "escapes show where Markdown is not read"


@pytest.mark.parametrize("path", PAGES)
def test_markdown_in_a_shared_link_is_shown_as_text_and_fetches_nothing(tab, path):
    requests = watch(tab)
    query = urlencode(dict(text=TEXT, pair=PAIR, source="hub", model=MODEL))
    tab.open(f"{path}?{query}", charts=0).wait_for_content()
    open_panels(tab)
    assert "Traceback" not in tab.page.inner_text("body")
    # the sidebar says the model id cannot be loaded, quoting it; the provenance record holds the pair (summary)
    # or the whole record (Export); Scaling shows no provenance, Compare stops at its own message (token counts)
    assert_shown_as_text(tab, requests, "![m](", where="[data-testid='stSidebar']")
    assert_shown_as_text(
        tab,
        requests,
        *(() if path in ("scaling", "compare") else ("![x](", "[click](")),
        where="[data-testid='stMain']",
    )
    tab.shot(f"hostile-links-{path or 'heads'}")


def test_a_hostile_target_text_is_shown_as_text(tab, tmp_path):
    requests = watch(tab)
    folder = build("t5", tmp_path / "t5")
    target = f"a dog {IMAGE} {LINK}"
    tab.open(f"?{urlencode(dict(text='the cat sat', source='hub', model=str(folder), target=target))}", charts=1)
    open_panels(tab)
    assert_shown_as_text(tab, requests, "![x](", "[click](", where="[data-testid='stMain']")


def test_an_uploaded_record_is_shown_as_text(tab, bundled):
    data = hostile_upload(attnviz.trace(bundled, "A dog ran away."), TEXT, MODEL)
    requests = watch(tab)
    tab.open("export", charts=0)
    tab.page.locator("[data-testid='stFileUploaderDropzoneInput']").set_input_files(
        files=[{"name": "hostile.npz", "mimeType": "application/octet-stream", "buffer": data}]
    )
    tab.idle(charts=0, until=lambda: tab.page.get_by_text("Its provenance").count() > 0)
    tab.page.get_by_text("Its provenance").click()
    tab.page.wait_for_timeout(500)
    assert_shown_as_text(tab, requests, "saved by ![x](", "![m](", where="[data-testid='stMain']")
