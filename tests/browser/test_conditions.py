"""Every page in the conditions people meet: shared links, causal models, dark theme, long texts, clicks, offline."""

from __future__ import annotations

from urllib.parse import parse_qs, urlparse


def query(tab) -> dict[str, list[str]]:
    return parse_qs(urlparse(tab.page.url).query)


def test_links_carry_short_ids_and_old_label_links_still_open(tab):
    # an old link, written when the URL held display labels
    tab.open("masks?source=Our+module&fill=float32+min+(the+model%27s+own)&hide=02+cat", charts=1)
    q = query(tab)
    assert q.get("source") == ["module"] and q.get("hide") == ["2"], tab.page.url
    assert "fill" not in q, tab.page.url  # the default fill: a clean link leaves it out
    assert tab.page.get_by_role("radio", name="Our module").is_checked()
    assert tab.page.get_by_role("radio", name="float32 min (the model's own)").is_checked()
    # a choice made on the page is written as its id
    tab.page.locator("[data-testid='stRadio'] label", has_text="-1e9").click()
    tab.idle()
    assert query(tab).get("fill") == ["-1e9"], tab.page.url
    tab.page.locator("[data-testid='stRadio'] label", has_text="Hugging Face model").click()
    tab.idle()
    assert query(tab).get("source") == ["hub"], tab.page.url
    assert "+" not in (query(tab).get("source") or [""])[0]
