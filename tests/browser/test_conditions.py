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


def chart(tab, figure: str) -> str:
    """A JS expression for the chart whose layout.meta.figure is `figure`."""
    return f"Array.from(document.querySelectorAll('.js-plotly-plot')).find(g => g.layout.meta?.figure === '{figure}')"


def test_a_causal_model_shows_its_own_mask_as_its_own(tab, tiny_gpt2_dir):
    tab.open(f"masks?source=hub&model={tiny_gpt2_dir}", charts=4)
    main = tab.page.inner_text("[data-testid='stMain']")
    assert "This model is causal" in main
    assert "Turn on the causal mask" not in main and "Nothing is masked" not in main
    titles = tab.page.evaluate(f"() => {chart(tab, 'mask_weights')}.layout.annotations.map(a => a.text)")
    assert not any("every key visible" in t for t in titles), titles
    assert any("own causal mask" in t for t in titles), titles
    ticks = tab.page.evaluate(f"() => {chart(tab, 'mask_leak')}._fullLayout.yaxis._vals.map(v => v.text)")
    assert len(ticks) == len(set(ticks)), f"leak axis ticks repeat: {ticks}"
    tab.shot("masks-causal-model")
    assert tab.errors_on_page() == []
