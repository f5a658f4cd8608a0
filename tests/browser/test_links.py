"""Links in Chromium: every control that changes the picture writes the address bar on every change, and the
address reopens the same view in a fresh browser context (no cookies, no session: only the URL).

One server (the session's) and one browser; a context per case. After every action the test waits for the
script to finish and for the address bar to change: a change that does not reach the link is a failure.
"""

from __future__ import annotations

import json
from urllib.parse import parse_qs, urlparse

import pytest
from browserkit import IDLE, Tab, tab_in, wait_drawn

SENTENCE = "Links carry the whole view, every control of it."
LONG = " ".join(["The cat sat on the mat because it was tired, and the dog watched it from the door."] * 12)

# What a person sees: every widget's label and value, every chart's meta and titles.
VIEW_JS = """() => {
  const main = document.querySelector("[data-testid='stMain']"), side = document.querySelector("[data-testid='stSidebar']");
  const label = el => (el.querySelector("[data-testid='stWidgetLabel']")?.innerText || '').trim();
  const widgets = [];
  for (const root of [side, main]) {
    if (!root) continue;
    for (const el of root.querySelectorAll("[data-testid='stSlider']"))
      widgets.push(['slider', (el.querySelector('input')?.getAttribute('aria-label') || '').replace(' — start', ''), Array.from(el.querySelectorAll("input[type='range']"), t => t.getAttribute('aria-valuetext') || t.value).join(',')]);
    for (const el of root.querySelectorAll("[data-testid='stSelectbox'], [data-testid='stMultiSelect']"))
      widgets.push(['select', label(el), el.querySelector('input[role=combobox]')?.value || el.innerText.replace(label(el), '').trim()]);
    for (const el of root.querySelectorAll("[data-testid='stRadio']"))
      widgets.push(['radio', label(el), Array.from(el.querySelectorAll('label'), l => l.querySelector('input')?.checked ? l.innerText : '').join('')]);
    for (const el of root.querySelectorAll("[data-testid='stCheckbox']"))
      widgets.push(['toggle', el.innerText.trim(), String(el.querySelector('input')?.checked)]);
    for (const el of root.querySelectorAll("[data-testid='stNumberInput'], [data-testid='stTextInput'], [data-testid='stTextArea']"))
      widgets.push(['input', label(el), el.querySelector('input, textarea')?.value]);
    for (const el of root.querySelectorAll("[data-testid='stButtonGroup']"))
      widgets.push(['segmented', label(el), Array.from(el.querySelectorAll("[aria-checked='true']"), b => b.innerText).join('|')]);
  }
  const charts = Array.from(document.querySelectorAll('.js-plotly-plot'), gd => [
    JSON.stringify(gd.layout.meta || null), gd.layout.title?.text || '', (gd.layout.annotations || []).map(a => a.text).join('|')]);
  return {path: location.pathname, title: main.querySelector('h1')?.innerText, widgets, charts};
}"""


def view(tab: Tab) -> dict:
    return tab.page.evaluate(VIEW_JS)


def new_tab(browser, base: str) -> Tab:
    ctx = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = ctx.new_page()
    page.set_default_timeout(90_000)
    return Tab(page, base)


def settle(tab: Tab, before: str, charts: int = 1) -> None:
    """Wait for the run the action started to end and for the address bar to move on from `before`."""
    tab.idle(charts=charts)
    tab.wait_until(lambda: tab.page.url != before, timeout=20_000)
    tab.page.wait_for_timeout(400)  # a write that arrives late (the race this file guards) has time to land
    tab.page.wait_for_selector(IDLE)


def moved_on(tab: Tab, before: str, charts: int) -> None:
    """settle() without its fixed waits, for a step that only sets the scene: the address bar has moved on from
    `before` (the action's run wrote it), then that run has ended and the charts are drawn. The address is read
    only after the last step of a round, which settle()s in full."""
    tab.wait_until(lambda: tab.page.url != before, timeout=20_000)
    tab.page.wait_for_selector(IDLE)
    wait_drawn(tab.page, charts)


def thumb(tab: Tab, name: str):
    """A slider's handle by its accessible label (a range slider's handles: 'label — start', 'label — end')."""
    return tab.page.locator(f"input[type='range'][aria-label={json.dumps(name, ensure_ascii=False)}]")


def slide(tab: Tab, name: str, steps: int, key: str = "ArrowRight") -> None:
    handle = thumb(tab, name)
    handle.scroll_into_view_if_needed()
    handle.focus()
    for _ in range(steps):
        handle.press(key)


def choose(tab: Tab, label: str, option: str) -> None:
    """Pick `option` in the selectbox labelled `label`."""
    box = tab.page.locator(f"input[role='combobox'][aria-label={json.dumps(label, ensure_ascii=False)}]")
    box.scroll_into_view_if_needed()
    box.click()
    box.fill(option)  # long lists draw only the options in view: filter first
    tab.page.get_by_role("option", name=option).first.click()


def add_option(tab: Tab, label: str, option: str) -> None:
    """Add `option` to the multiselect labelled `label`, then close its menu (an open menu hides the page from
    assistive lookups such as get_by_role)."""
    choose(tab, label, option)
    tab.page.keyboard.press("Escape")


def click(tab: Tab, text: str) -> None:
    """Click a toggle's or an expander's text."""
    target = tab.page.get_by_text(text, exact=True).first
    target.scroll_into_view_if_needed()
    target.click()


def pick(tab: Tab, option: str) -> None:
    """Pick an option of a radio group or a segmented control."""
    target = tab.page.get_by_role("radio", name=option, exact=True).first
    target.scroll_into_view_if_needed()
    target.click(force=True)  # a radio's input is drawn under its label


def fill(tab: Tab, label: str, text: str) -> None:
    box = tab.page.get_by_label(label, exact=True)
    box.fill(text)
    box.press("Enter")


def advanced_token_limit(tab: Tab) -> None:
    click(tab, "Advanced")
    slide(tab, "Token limit", 1, key="ArrowLeft")


# Per page: the text to open it with, the number of charts it draws, then actions (each must move the address bar).
CASES = {
    "heads": (
        SENTENCE,
        4,
        [
            lambda t: slide(t, "Layer", 2),
            lambda t: pick(t, "scaled"),
            lambda t: pick(t, "weights"),
            lambda t: pick(t, "log"),
            lambda t: slide(t, "Head", 4),
            lambda t: pick(t, "svg"),
            lambda t: click(t, "Without sinks"),  # weights only: before value-weighted, which disables it
            lambda t: choose(t, "Key token", "02 carry"),
            lambda t: pick(t, "value-weighted"),  # weights x ||v W_O||, rows renormalised: the link carries it too
        ],
    ),
    "heads-long": (
        LONG,
        4,
        [
            advanced_token_limit,
            lambda t: slide(t, "Queries shown (rows), at most 128 — start", 3, key="PageUp"),
            lambda t: slide(t, "Keys shown (columns), at most 128 — end", 1, key="ArrowLeft"),
        ],
    ),
    "headstats": (
        SENTENCE,
        3,
        [
            lambda t: click(t, "Hide special tokens"),
            lambda t: click(t, "Leave out key 0"),
            lambda t: choose(t, "Statistic", "to previous token"),
            lambda t: choose(t, "Head (sorted by to previous token, highest first)", "layer 2, head 3:"),
            lambda t: pick(t, "value-weighted"),  # the View beside the opened head (URL key view)
        ],
    ),
    "rollout": (
        SENTENCE,
        2,
        [lambda t: slide(t, "Layers (start, end) — start", 1), lambda t: choose(t, "Output token", "03 the")],
    ),
    "neuron": (SENTENCE, 1, [lambda t: slide(t, "Head", 5), lambda t: choose(t, "Query token", "04 whole")]),
    "neuron-long": (
        LONG,
        1,
        [
            lambda t: slide(t, "Keys shown, at most 128 — start", 3, key="PageUp"),
            lambda t: click(t, "Keep key 0 in view"),
            lambda t: choose(t, "Query token", "202 cat"),
        ],
    ),
    "scores": (
        SENTENCE,
        2,  # the first tab's charts (the second draws 3)
        [
            lambda t: slide(t, "Head", 2),
            lambda t: t.page.get_by_role("tab", name="Random vectors").click(),
            lambda t: slide(t, "Vector width d", 1),
            lambda t: fill(t, "Seed", "7"),
        ],
    ),
    "words": (
        SENTENCE,
        2,
        [
            lambda t: choose(t, "Sub-word convention", "byte-level BPE"),
            lambda t: slide(t, "Head", 3),
            lambda t: pick(t, "value-weighted"),
        ],
    ),
    "pairs": (SENTENCE, 3, [lambda t: pick(t, "value-weighted"), lambda t: slide(t, "Head", 2)]),  # with PAIRS' text
    "compare-sentences": (
        SENTENCE,
        1,
        [
            lambda t: fill(t, "Sentence b", "The dog sat on the rug because it was tired."),
            lambda t: choose(t, "Rank heads by", "Jensen-Shannon divergence"),
        ],
    ),
    "compare-layers": (
        SENTENCE,
        1,
        [lambda t: pick(t, "Two layers"), lambda t: slide(t, "Layer b", 2), lambda t: pick(t, "value-weighted")],
    ),
    "compare-long": (
        LONG,
        1,
        [
            lambda t: slide(t, "Queries shown (rows), at most 128 — start", 3, key="PageUp"),
            lambda t: slide(t, "Keys shown (columns), at most 128 — end", 1, key="ArrowLeft"),
        ],
    ),
    "scaling": (
        SENTENCE,
        3,
        [
            lambda t: slide(t, "Head", 3),
            lambda t: click(t, "All heads"),
            lambda t: slide(t, "Multiply the scores by", 1),
        ],
    ),
    "masks": (
        SENTENCE,
        3,
        [
            lambda t: fill(t, "Pad to N tokens (0 = none)", "16"),
            lambda t: click(t, "Causal mask (no looking ahead)"),
            lambda t: pick(t, "all layers"),
            lambda t: pick(t, "-inf"),
            lambda t: slide(t, "Head", 2),
        ],
    ),
    "export": (SENTENCE, 0, [lambda t: pick(t, "scores"), lambda t: slide(t, "Head", 6)]),
    "heads-generate": (  # opened on the tiny Llama with a chat template (chat_model below): a decoder with its head
        "the cat sat on the mat",
        3,
        [
            lambda t: fill(t, "Generate new tokens (0 = off)", "4"),
            lambda t: click(t, "Chat template"),
            lambda t: slide(t, "Generation step", 2, key="ArrowLeft"),
        ],
    ),
    "ablation": (  # a decoder with its language-model head (DECODER_CASES): the bundled model cannot predict tokens
        SENTENCE,
        2,
        [
            lambda t: add_option(t, "Heads to remove (at most 16)", "L1 H2"),
            lambda t: pick(t, "mean over positions"),
            lambda t: fill(t, "Target token (empty: the most likely one before)", "Ġcat"),
        ],
    ),
}
CHAT = ("{% for m in messages %}<s> {{ m['role'] }} {{ m['content'] }} </s> {% endfor %}"
        "{% if add_generation_prompt %}<s> assistant {% endif %}")  # fmt: skip


@pytest.fixture(scope="module")
def chat_model(tiny_llama_dir, tmp_path_factory) -> str:
    """The tiny grouped-query Llama (saved with its head) with a chat template: every generation control shows."""
    import shutil

    from transformers import AutoTokenizer

    folder = tmp_path_factory.mktemp("links-chat-llama")
    shutil.copytree(tiny_llama_dir, folder, dirs_exist_ok=True)
    tok = AutoTokenizer.from_pretrained(folder)
    tok.chat_template = CHAT
    tok.save_pretrained(folder)
    return str(folder)


#: Cases opened on a tiny GPT-2 saved with its language-model head (a folder the server loads as a local model).
DECODER_CASES = {"ablation"}


#: Cases opened with a second sentence (the Sentence pairs page draws nothing without one).
PAIRS = {"pairs": "It was tired, and it slept."}


def open_page(tab: Tab, page: str, text: str, charts: int, model: str | None = None) -> None:
    from urllib.parse import quote

    hub = f"&source=hub&model={quote(str(model))}" if model else ""
    hub += f"&pair={quote(PAIRS[page])}" if page in PAIRS else ""
    tab.open(f"{'' if page == 'heads' else page}?text={quote(text)}{hub}", charts=charts)  # Heads is the default page
    thumb(tab, "Layer").wait_for(state="attached")


@pytest.mark.parametrize("case", list(CASES))
def test_every_control_writes_the_link_and_the_link_reopens_the_same_view(browser, profile, server, case, request):
    page = case.split("-")[0]
    text, charts, actions = CASES[case]
    model = (
        request.getfixturevalue("chat_model") if case == "heads-generate"
        else request.getfixturevalue("gpt2_bpe_dir") if case in DECODER_CASES else None
    )  # fmt: skip
    a, b = tab_in(profile, server), new_tab(browser, server)  # b: a fresh browser
    try:
        open_page(a, page, text, charts, model)
        start = view(a)
        for i, act in enumerate(actions):
            before = a.page.url
            act(a)
            try:
                settle(a, before, charts)
            except AssertionError:
                pytest.fail(f"{case}: action {i} did not reach the address bar ({before})")
        sent = view(a)
        assert sent["widgets"] != start["widgets"]
        link = a.page.url
        assert b.page.context.cookies() == []
        b.page.goto(link, wait_until="domcontentloaded")
        b.idle(charts=charts)
        thumb(b, "Layer").wait_for(state="attached")
        b.idle(charts=charts)
        got = view(b)
        assert got["widgets"] == sent["widgets"], [w for w in got["widgets"] if w not in sent["widgets"]]
        assert got["charts"] == sent["charts"] and got["title"] == sent["title"] and got["path"] == sent["path"]
        assert a.errors_on_page() == [] and b.errors_on_page() == []
    finally:
        a.page.close()
        b.page.context.close()


def test_the_head_slider_writes_head_after_layer_stage_and_colour_changes(browser, profile, server):
    """The issue's session, six rounds: type a sentence, move Layer with the keys, toggle the stage, pick colour
    power, move Head; the address bar must carry the head the slider shows (and every other choice of the round),
    and a fresh context opened on it must show that head.

    The race behind the old loss of head= (a run's needless address write carrying a head older than the one the
    browser just wrote) is checked run by run in tests/app/test_url_choice_writes.py, which fails without the fix;
    this session ran 20 rounds before and passed twice with the fix taken out, so its length found nothing. Six
    rounds take every layer step, every head step and both colour choices; the second context reopens rounds 0, 3
    and the last (both colour choices), a full page load each. Head and Layer moves (key presses a person's pace
    apart) settle() in full; the steps between wait for their own run and no longer (moved_on)."""
    a, b = tab_in(profile, server), new_tab(browser, server)  # b: a fresh browser
    try:
        a.open("", charts=3)
        for i in range(ROUNDS):
            box = a.page.locator("textarea[aria-label='Sentence']")
            before = a.page.url
            text = f"Sentence number {i} reopens on its own head."
            box.fill(text)
            box.press("Control+Enter")
            moved_on(a, before, 3)
            layer = moved(a, "Layer", 2 + i % 3, 5)
            for stage in ("scores", "weights"):
                before = a.page.url
                pick(a, stage)
                moved_on(a, before, 3)
            before = a.page.url
            colour = "power 0.5" if i % 2 == 0 else "log"
            pick(a, colour)
            moved_on(a, before, 3)
            head = moved(a, "Head", 3 + i % 5, 11)
            assert f"head={head}" in a.page.url and f"layer={layer}" in a.page.url, (i, head, a.page.url)
            query = parse_qs(urlparse(a.page.url).query)
            want = {"text": [text], "layer": [str(layer)], "head": [str(head)]}
            assert {k: query.get(k) for k in want} == want and "stage" not in query, (i, a.page.url)
            assert query.get("colour") == [COLOUR_IDS[colour]], (i, a.page.url)
            if i not in (0, 3, ROUNDS - 1):
                continue
            b.page.goto(a.page.url, wait_until="domcontentloaded")
            b.idle(charts=3)
            thumb(b, "Head").wait_for(state="attached")
            b.idle(charts=3)
            assert b.sliders().get("Head") == str(head) and b.sliders().get("Layer") == str(layer), (i, b.sliders())
            metas = b.page.evaluate(
                "() => Array.from(document.querySelectorAll('.js-plotly-plot'), g => g.layout.meta)"
            )
            assert {"figure": "head_detail", "layer": layer, "head": head, "stage": "weights"} in metas, (i, metas)
    finally:
        a.page.close()
        b.page.context.close()


#: The rounds of the head-slider session.
ROUNDS = 6

#: The colour choices of the head-slider session -> their ids in the address.
COLOUR_IDS = {"power 0.5": "sqrt", "log": "log"}


def moved(tab: Tab, name: str, steps: int, top: int) -> int:
    """Move a slider `steps` keys (right, or left when that would pass `top`, never to 0), a person's pace apart;
    return the value it then shows, which must differ from where it started."""
    tab.wait_until(lambda: name in tab.sliders())  # a rerun's page between two runs can lack it for a moment
    start = int(tab.sliders()[name])
    key = "ArrowRight" if start + steps <= top else "ArrowLeft"
    steps = steps if key == "ArrowRight" else min(steps, start - 1)  # never 0: a default is left out of the link
    before = tab.page.url
    handle = thumb(tab, name)
    handle.focus()
    for _ in range(steps):
        handle.press(key)
        tab.page.wait_for_timeout(120)
    settle(tab, before, 3)
    shown = int(tab.sliders()[name])
    assert shown != start, f"{name} did not move"
    return shown
