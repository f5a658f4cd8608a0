"""Every page in the conditions people meet: shared links, causal models, dark theme, long texts, clicks, offline."""

from __future__ import annotations

from urllib.parse import parse_qs, urlparse

from browserkit import chart_js


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
    tab.idle(until=lambda: query(tab).get("fill") == ["-1e9"])
    assert query(tab).get("fill") == ["-1e9"], tab.page.url
    tab.page.locator("[data-testid='stRadio'] label", has_text="Hugging Face model").click()
    tab.idle(until=lambda: query(tab).get("source") == ["hub"])
    assert query(tab).get("source") == ["hub"], tab.page.url
    assert "+" not in (query(tab).get("source") or [""])[0]


def test_a_causal_model_shows_its_own_mask_as_its_own(tab, tiny_gpt2_dir):
    tab.open(f"masks?source=hub&model={tiny_gpt2_dir}", charts=4)
    main = tab.page.inner_text("[data-testid='stMain']")
    assert "This model is causal" in main
    assert "Turn on the causal mask" not in main and "Nothing is masked" not in main
    titles = tab.page.evaluate(f"() => {chart_js('mask_weights')}.layout.annotations.map(a => a.text)")
    assert not any("every key visible" in t for t in titles), titles
    assert any("own causal mask" in t for t in titles), titles
    ticks = tab.page.evaluate(f"() => {chart_js('mask_leak')}._fullLayout.yaxis._vals.map(v => v.text)")
    assert len(ticks) == len(set(ticks)), f"leak axis ticks repeat: {ticks}"
    tab.shot("masks-causal-model")
    assert tab.errors_on_page() == []


PAGES = {"heads": "", "scaling": "scaling", "masks": "masks", "module": "module?source=module"}

# Every colour a figure draws text or lines with, against the background it draws them on, as rgba strings.
COLOURS_JS = """() => {
  const norm = c => { const e = document.createElement('div'); e.style.color = c || 'rgba(0,0,0,0)';
    document.body.appendChild(e); const v = getComputedStyle(e).color; e.remove(); return v; };
  const page = getComputedStyle(document.querySelector("[data-testid='stMain']")).backgroundColor
    || getComputedStyle(document.body).backgroundColor;
  const out = [];
  for (const gd of document.querySelectorAll('.js-plotly-plot')) {
    const L = gd._fullLayout, name = (L.meta && L.meta.figure) || 'chart';
    const paper = norm(L.paper_bgcolor);
    const bg = paper.startsWith('rgba') && paper.endsWith(', 0)') ? page : paper;
    out.push([name + ' font', norm(L.font.color), bg, 4.5]);
    for (const k of Object.keys(L).filter(k => /^[xy]axis\\d*$/.test(k)))
      if (L[k].visible !== false && L[k].tickfont) out.push([name + ' ' + k + ' ticks', norm(L[k].tickfont.color), bg, 4.5]);
    for (const a of L.annotations || [])
      out.push([name + ' annotation ' + a.text.slice(0, 20), norm(a.font?.color || L.font.color),
                a.bgcolor && norm(a.bgcolor) !== 'rgba(0, 0, 0, 0)' ? norm(a.bgcolor) : bg, 4.5]);
    for (const t of gd._fullData)
      if (t.type === 'scatter' && t.mode && t.mode.includes('lines') && t.visible !== false)
        out.push([name + ' line ' + t.name, norm(t.line?.color), bg, (t.line?.width || 2) >= 6 ? 1.4 : 3.0]);  // a wide band is an area
    out.push([name + ' page', page, page, 0]);
  }
  return out;
}"""


def rgba(css: str) -> tuple[float, float, float, float]:
    parts = [float(v) for v in css[css.index("(") + 1 : -1].split(",")]
    return (*parts[:3], parts[3] if len(parts) > 3 else 1.0)


def contrast(fg: str, bg: str) -> float:
    """WCAG contrast ratio of `fg` (alpha-blended over `bg`) against `bg`."""
    *f, a = rgba(fg)
    b = rgba(bg)[:3]
    f = [a * x + (1 - a) * y for x, y in zip(f, b)]

    def lum(c):
        c = [v / 255 for v in c]
        c = [v / 12.92 if v <= 0.03928 else ((v + 0.055) / 1.055) ** 2.4 for v in c]
        return 0.2126 * c[0] + 0.7152 * c[1] + 0.0722 * c[2]

    hi, lo = sorted((lum(f), lum(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def test_dark_theme_figures_keep_their_text_and_lines_legible(profile, server):
    from browserkit import tab_in

    tab = tab_in(profile, server, 1280, 800)
    tab.page.emulate_media(color_scheme="dark")  # the system's theme, which the app follows
    try:
        bad = []
        for name, path in PAGES.items():
            if name in ("scaling", "masks"):  # through the sidebar (no reload of the app's scripts): the same session
                tab.switch(path, charts=2)
            else:  # the first page; Our module's source comes with its link
                tab.open(path, charts=2)
            tab.page.wait_for_timeout(500)
            found = tab.page.evaluate(COLOURS_JS)
            page_bg = next(c for what, c, _, _ in found if what.endswith(" page"))
            assert sum(rgba(page_bg)[:3]) < 150, f"the dark theme did not apply: page background {page_bg}"
            bad += [f"{name}: {what} {fg} on {bg}" for what, fg, bg, need in found if contrast(fg, bg) < need]
            tab.shot(f"dark-{name}")
        assert bad == [], "\n".join(bad)
    finally:
        tab.page.close()


def test_clicking_a_tile_shows_and_marks_the_opened_head_without_server_warnings(tab):
    from browserkit import SERVER_LOG

    log = SERVER_LOG
    tab.open("?text=The+cat+sat+on+the+mat", charts=4)
    tab.wait_until(  # four charts drawn need not include the overview on a busy host: wait for it by name
        lambda: tab.page.evaluate(f"() => !!{chart_js('overview')}?._fullData")
    )
    before = log.read_text()
    x, y = tab.page.evaluate(
        f"""() => {{
            const gd = {chart_js("overview")};
            gd.scrollIntoView();
            const t = gd._fullData.find(t => t.type === 'scatter' && t.customdata);
            const k = t.customdata.findIndex(c => c[0] === 3 && c[1] === 7);
            const box = gd.getBoundingClientRect();
            return [box.left + gd._fullLayout.xaxis._offset + gd._fullLayout.xaxis.l2p(t.x[k]),
                    box.top + gd._fullLayout.yaxis._offset + gd._fullLayout.yaxis.l2p(t.y[k])];
        }}"""
    )
    tab.page.mouse.click(x, y)
    tab.idle(charts=4, until=lambda: tab.sliders().get("Head") == "7")
    tab.page.wait_for_timeout(1000)
    assert tab.sliders().get("Layer") == "3" and tab.sliders().get("Head") == "7", tab.sliders()
    top = tab.page.evaluate("() => document.querySelector('#one-head').getBoundingClientRect().top")
    assert 0 <= top < 400, f"the opened head's heading is not in view (top {top})"
    shapes = tab.page.evaluate(f"() => {chart_js('overview')}.layout.shapes || []")
    assert len(shapes) == 1, shapes  # the opened tile is outlined
    new = log.read_text()[len(before) :]
    assert "Stack (most recent call last)" not in new and "Traceback" not in new, new[:2000]
    tab.shot("tile-opened")


def test_no_request_leaves_the_server_on_any_page(tab):
    requests: list[str] = []
    tab.page.on("request", lambda r: requests.append(r.url))
    for path in PAGES.values():
        tab.open(path, charts=1)
        tab.page.wait_for_timeout(1000)  # late requests: fonts, icons
    outside = [u for u in requests if not u.startswith((tab.base + "/", "data:", "blob:", "about:"))]
    assert requests and outside == [], outside


# The first chart's card and tick ink as drawn on screen (the page's stylesheet applied), and the figure's own paper.
CARD_JS = """() => { const gd = document.querySelector('.js-plotly-plot');
  return [getComputedStyle(gd.querySelector('.main-svg')).backgroundColor,
          getComputedStyle(gd.querySelector('.xtick text')).fill, gd.layout.paper_bgcolor]; }"""


def test_dark_theme_charts_follow_the_page_and_their_png_stays_white(profile, server):
    import io

    from browserkit import tab_in
    from PIL import Image

    tab = tab_in(profile, server, 1280, 800)
    tab.page.emulate_media(color_scheme="dark")
    try:
        tab.open("scaling", charts=4)
        card, ink, paper = tab.page.evaluate(CARD_JS)
        assert sum(rgba(card)[:3]) < 150 and sum(rgba(ink)[:3]) > 600, (card, ink)  # a dark card, light ink
        assert paper == "#ffffff"  # the figure itself stays print-ready
        chart = tab.page.locator(".js-plotly-plot").first
        chart.hover()
        with tab.page.expect_download() as download:
            chart.locator(".modebar-btn[data-title*='Download']").click()
        image = Image.open(io.BytesIO(download.value.path().read_bytes())).convert("RGB")
        assert image.getpixel((2, 2)) == (255, 255, 255)  # the file: the white card
        darkest = min(sum(px) for px in image.resize((image.width // 4, image.height // 4)).getdata())
        assert darkest < 3 * 100  # with dark ink on it
    finally:
        tab.page.close()
