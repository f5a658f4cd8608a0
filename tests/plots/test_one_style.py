"""One figure style: every chart built print-ready (a white card with dark ink, what every download and export
copies), drawn through one path (ui.chart), and recoloured on a dark page by one stylesheet (ui.screen_look) that
maps every colour the style draws with.

Every public function of attnviz.plots that returns a Figure is found by inspection and watched while the notebook
path (attnviz.figures, the same builders the pages call) and a few direct calls draw every figure the package can
make from the bundled model's trace and small arrays. A builder nobody calls here fails the test (add it below), and
so does a figure that skips the style rule (plots.common.on_paper / finish): a figure Plotly leaves alone has no
paper or plot colour of its own and takes the theme's. A figure drawing text or lines in a dark colour the dark look
does not map would vanish on the dark card: that fails too. A source scan checks that no page or ui module calls
st.plotly_chart, and that charts are drawn by ui.chart alone, which hands the figure over untouched (our own chart
component, no theme applied) with the shared modebar config.
"""

from __future__ import annotations

import ast
import copy
import importlib
import inspect
import json
import pkgutil
import re
from pathlib import Path

import numpy as np
import plotly.graph_objects as go
import plotly.io as pio
import pytest

import attnviz
from attnviz import figures, plots, ui
from attnviz.analysis import scores as S
from attnviz.analysis.geometry import Geometry
from attnviz.analysis.softcap import Softcap
from attnviz.corpus.examples import examples_from_rows
from attnviz.plots import common, margins
from attnviz.plots.panels import panel_axes, panel_layout
from attnviz.ui.plotly_view import TRACES

ROOT = Path(__file__).resolve().parents[2]
WHITE = {"#ffffff", "#fff", "white", "rgb(255,255,255)"}
MASKED_GREY = common.MASKED_BG  # a masked stage's plot background: the grey its NaN (removed) cells show


def _builders() -> dict[str, tuple[object, str]]:
    """{module.function: (module, name)} of every public function in attnviz.plots annotated to return a Figure."""
    found = {}
    for info in pkgutil.iter_modules(plots.__path__):
        module = importlib.import_module(f"attnviz.plots.{info.name}")
        for name, fn in inspect.getmembers(module, inspect.isfunction):
            if fn.__module__ == module.__name__ and not name.startswith("_"):
                sig = inspect.signature(fn)
                takes_a_figure = next(iter(sig.parameters), "") == "fig"  # a helper (finish, add_boundary): no builder
                if "Figure" in str(sig.return_annotation) and not takes_a_figure:
                    found[f"{info.name}.{name}"] = (module, name)
    return found


BUILDERS = _builders()  # found before the fixture below wraps them


def _dark(colour: str) -> bool:
    c = colour.lstrip("#")
    return len(c) == 6 and sum(int(c[i : i + 2], 16) for i in (0, 2, 4)) < 3 * 96


def _check(name: str, fig: go.Figure) -> None:
    layout = fig.layout
    assert layout.paper_bgcolor in WHITE, f"{name}: paper {layout.paper_bgcolor}"
    assert layout.plot_bgcolor in WHITE | {MASKED_GREY}, f"{name}: plot background {layout.plot_bgcolor}"
    assert layout.font.color and _dark(layout.font.color), f"{name}: font colour {layout.font.color}"
    assert layout.template.layout.paper_bgcolor in WHITE, f"{name}: a template that is not white"
    for a in layout.annotations:  # subplot titles and notes: dark too
        assert a.font.color is None or _dark(a.font.color), f"{name}: annotation in {a.font.color}"
    assert isinstance(layout.meta, dict) and layout.meta.get("figure"), f"{name}: no layout.meta['figure']"
    if any(t.type == "heatmap" for t in fig.data):  # no light line over the grey of masked cells
        for axis in [*fig.select_xaxes(), *fig.select_yaxes()]:
            assert axis.zeroline is False and axis.showgrid is False, f"{name}: grid or zero line over a heatmap"


@pytest.fixture(scope="module")
def drawn(bundled, tiny_gpt2, monkeypatch_module):
    """{builder: [figures]} for every figure the plots package draws here."""
    seen: dict[str, list] = {}
    for key, (module, name) in BUILDERS.items():
        real = getattr(module, name)

        def watch(*a, _real=real, _key=key, **kw):
            fig = _real(*a, **kw)
            seen.setdefault(_key, []).append(fig)
            return fig

        monkeypatch_module.setattr(module, name, watch)
    text = "The cat sat on the mat because it was tired."
    tr = attnviz.trace(bundled, text)
    for page in ("heads", "scaling", "headstats", "rollout", "neuron", "words", "compare", "geometry"):
        figures.page_figures(tr, page, layer=1, head=2)
    figures.page_figures(attnviz.trace(bundled, text, pair="It slept."), "pairs", layer=1, head=2)
    hidden = attnviz.trace(bundled, text, hide=(2, 3))
    figures.page_figures(hidden, "masks", layer=1, head=2, unmasked=tr)
    win = plots.heatmaps.Window((2, 6), (0, 8))
    plots.heatmaps.head_grid(tr, 0, "masked", token_range=win, boundary=4)
    plots.heatmaps.head_detail(tr, 0, 1, "scores", token_range=win, colours="log")
    q, k = S.seeded_queries_keys(6, 8, 0)
    results = S.ScoreModule.seeded(8, seed=0).all(q, k)
    plots.scores.score_histograms(results)
    plots.scores.weights_side_by_side(results, tr.tokens[:6], tr.tokens[:6])
    plots.scores.spread_lines((4, 16), S.spread_by_width((4, 16), seed=0))
    even = np.full(tr.n_tokens, 1 / tr.n_tokens)
    plots.rollout.flow_bars(tr.tokens, even, even, query=3)
    plots.sinks.sink_share_bars(tr.tokens, np.linspace(0, 1, tr.n_tokens), head=1)
    plots.sinks.sink_maps(np.full((2, 3), 0.5), np.full((2, 3), 0.1))
    plots.columns.who_reads(np.full((3, tr.n_tokens), 0.2), tr.tokens, 0, "000 [CLS]", "who reads token 0")
    result = attnviz.ablate(tiny_gpt2, "the cat sat on the", heads=[(0, 1)])
    plots.ablation.prediction_bars(result)
    plots.ablation.change_grid(result.attention_change(), result, "later heads")
    plots.ablation.head_picker(2, 4, [(0, 1), (1, 3)])
    before = np.linspace(-20, 20, 9)
    plots.softcap.softcap_curve(Softcap(before, 5 * np.tanh(before / 5), 5.0, n_cells=9), head=1)
    rng = np.random.default_rng(0)
    points = rng.random((6, 2))
    prof = attnviz.HeadProfile(
        {"entropy": rng.random((2, 3)), "sink": rng.random((2, 3))}, np.zeros((2, 3, 20), int), None, examples_from_rows([]), {},
        {"kv_groups": 3},
    )  # fmt: skip
    for colour in ("layer", "kv_group", "sink"):
        plots.corpus.head_finder(prof, "entropy", "sink", colour, selected=(1, 2))
    plots.corpus.head_map(points, prof, "layer", selected=(0, 1))
    example = {"query": 2, "text_id": 0, "keys": [2, 0, 1], "key_weights": [0.6, 0.3, 0.1]}
    plots.corpus.example_heatmap(example, "text 0, query 2")
    plots.corpus.example_heatmap(example, "text 0, query 2", None, ["[CLS]", "the", "cat", "[SEP]"])
    live = {"weights": rng.random((3, 4)), "queries": (1, 4), "keys": (0, 4), "n_keys": 4,
            "query_tokens": ["the", "cat", "[SEP]"], "key_tokens": ["[CLS]", "the", "cat", "[SEP]"]}  # fmt: skip
    plots.corpus.example_heatmap(example, "text 0, query 2", live)
    return seen


@pytest.fixture(scope="module")
def monkeypatch_module():
    with pytest.MonkeyPatch.context() as mp:
        yield mp


def test_every_figure_builder_is_drawn_here(drawn):
    missing = sorted(set(BUILDERS) - set(drawn))
    assert len(BUILDERS) >= 20, sorted(BUILDERS)  # the inspection finds the builders at all
    assert not missing, f"figure builders not drawn by this test (add a call to `drawn`): {missing}"


def test_every_trace_type_drawn_is_in_the_dashboards_plotly_bundle(drawn):
    # the dashboard's plotly.js bundle has these traces alone (scripts/plotly_bundle): another type would draw nothing
    types = {t.type for figs in drawn.values() for fig in figs for t in fig.data}
    assert {"heatmap", "bar", "scatter"} <= types <= TRACES, types - TRACES
    n = plots.geometry.GL_ABOVE // 2 + 1  # queries and as many keys: the query-key space's WebGL points
    xy, is_key, position = np.zeros((2 * n, 2)), np.repeat([False, True], n), np.tile(np.arange(n), 2)
    geo = Geometry(xy, is_key, position, n, n, before=0, after=0, a=1, method="pca", explained=(0.5, 0.5), note="")
    assert {t.type for t in plots.geometry.query_key_space(geo, ["tok"] * n).data} == {"scattergl"} <= TRACES


def test_every_figure_is_a_white_card_with_dark_ink(drawn):
    checked = 0
    for name, figs in drawn.items():
        for fig in figs:
            _check(name, fig)
            checked += 1
    assert checked >= 25


def test_a_figure_that_skips_the_rule_fails_the_check():
    fig = go.Figure(go.Heatmap(z=[[0, 1], [1, 0]]))
    fig.update_layout(meta={"figure": "raw"})
    with pytest.raises(AssertionError, match="paper"):
        _check("raw", fig)
    _check("raw", common.on_paper(fig))  # the same figure through the rule passes


def test_masked_cells_keep_their_grey_through_the_rule(drawn):
    for name in ("masks.stage_pair", "heatmaps.head_grid"):
        assert drawn[name][-1].layout.plot_bgcolor == MASKED_GREY, f"{name}: removed cells would look like 0"


def test_the_camera_asks_for_a_white_png_named_after_the_view(drawn):
    config = common.chart_config("layer2", "head3", "weights")
    options = config["toImageButtonOptions"]
    assert options["format"] == "png" and options["filename"] == "attnviz_layer2_head3_weights"
    assert options["scale"] == 2
    assert options["width"] is None and options["height"] is None  # the size on screen, not a 700-px reflow
    # the modebar's PNG copies the figure's own colours (Plotly has no background option for it): the white card
    fig = drawn["heatmaps.head_detail"][0]
    assert fig.layout.paper_bgcolor in WHITE and _dark(fig.layout.font.color)
    printed = common.print_ready(drawn["heatmaps.head_grid"][-1])  # files (the HTML export) keep the masked grey
    assert printed.layout.paper_bgcolor in WHITE and printed.layout.plot_bgcolor == MASKED_GREY


def test_every_figure_has_the_room_its_labels_colour_bars_and_legend_take(drawn):
    """One finishing step (common.finish) gives every figure at least margins.room's margins, so Plotly lays it out
    in one pass, and the toolbar's strip at its top. A builder that sets its own margins after it, or lays its figure
    out by hand, fails: Who reads gave its titled colour bar 106 px where room() gives 116, the Heads figures too."""
    short, checked = [], 0
    for name, figs in drawn.items():
        for fig in figs:
            m, need = fig.layout.margin, margins.room(fig)
            short += [f"{name}: {side} {m[side]} < {px}" for side, px in need.items() if (m[side] or 0) < px]
            short += [f"{name}: t {m.t}, no toolbar strip"] if (m.t or 0) < common.MODEBAR + 10 else []
            checked += 1
    assert checked >= 25 and not short, short


def test_a_figure_given_as_dicts_is_finished_as_the_same_figure_given_as_a_figure():
    """finish's dict path (the Heads grid, the Score functions panels: validated once) applies the same rule as its
    Figure path (Plotly's own update_layout, update_xaxes and update_annotations)."""
    layout = panel_layout(1, 2, ["left", "right"], 0.04, 0.0)
    layout["yaxis"]["title"] = {"text": "query"}
    layout["title"] = {"text": "pinned", "yref": "container", "y": 1, "pad": {"t": 8}}
    data = [
        dict(type="heatmap", z=[[0, 1], [1, 0]], colorbar=dict(title=dict(text="weight")), **panel_axes(0)),
        dict(type="heatmap", z=[[1, 0]], x=["a long key label", "k"], showscale=False, **panel_axes(1)),
    ]
    args = dict(top=40, margin=dict(r=20, b=30), meta={"k": 1}, plot_bgcolor=common.MASKED_BG)
    as_dicts = common.finish(copy.deepcopy(dict(data=data, layout=layout)), "both", 200, **args)
    as_figure = common.finish(go.Figure(dict(data=data, layout=layout)), "both", 200, **args)
    assert json.loads(as_dicts.to_json()) == json.loads(as_figure.to_json())
    m = as_dicts.layout.margin
    assert (m.t, m.r, as_dicts.layout.title.pad.t) == (40 + common.MODEBAR, 118, 8 + common.MODEBAR)  # a titled bar
    assert m.l > 40 and m.b == 30  # the query title and its labels; untitled key labels ask less than the 30 given
    assert as_dicts.layout.xaxis2.showgrid is False and as_dicts.layout.annotations[1].font.color == common.INK


def _sent(fig: go.Figure) -> dict:
    """The figure as Streamlit sends it to the browser (plotly.io.to_json without validation)."""
    return json.loads(pio.to_json(fig, validate=False))


def _validated(fig: go.Figure) -> dict:
    return _sent(go.Figure(fig.to_plotly_json()))


def test_every_figure_is_what_plotly_validation_makes_of_it(drawn, bundled, tiny_gpt2):
    """finish's dict path builds its Figure unvalidated (the Heads grid: 20 ms of its 21 were validation): every
    figure, on Plotly's default template (a notebook's) and on attnviz's (the dashboard's), must then be exactly what
    validating it gives: a named colour scale, a title given as a string or a template given by name would differ."""
    for name, figs in drawn.items():
        for fig in figs:
            assert _sent(fig) == _validated(fig), name
    tr = attnviz.trace(bundled, "the cat sat on the mat")
    results = S.ScoreModule.seeded(8, seed=0).all(*S.seeded_queries_keys(6, 8, 0))
    before = pio.templates.default
    try:
        common.template_by_default()
        made = attnviz.generate(tiny_gpt2, "the cat sat", max_new_tokens=3)  # spans drawn after finish
        win = plots.heatmaps.Window((1, 5), (0, 6))
        grids = [plots.heatmaps.head_grid(tr, 0), plots.heatmaps.head_grid(tr, 1, "scores", colours="log")]
        grids += [
            f(made, 0, *a, token_range=win, boundary=2)
            for f, a in ((plots.heatmaps.head_grid, ()), (plots.heatmaps.head_detail, (1,)))
        ]
        grids += [plots.heatmaps.overview(made, "masked", selected=(1, 1))]
        panels = (
            plots.scores.score_histograms(results),
            plots.scores.weights_side_by_side(results, *[tr.tokens[:6]] * 2),
        )
        for fig in (*grids, *panels):
            assert _sent(fig) == _validated(fig), fig.layout.meta["figure"]
            assert fig.layout.template.layout.paper_bgcolor in WHITE
    finally:
        pio.templates.default = before


def _calls(name: str):
    for path in [ROOT / "app.py", *ROOT.glob("app_pages/*.py"), *ROOT.glob("attnviz/ui/*.py")]:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and name in (getattr(node.func, "attr", ""), getattr(node.func, "id", "")):
                yield f"{path.relative_to(ROOT)}:{node.lineno}", node


def test_every_chart_is_drawn_through_the_one_path_as_built_with_the_shared_config():
    assert list(_calls("plotly_chart")) == []  # attnviz's own chart component (ui.plotly_view), never st.plotly_chart
    calls = list(_calls("plotly_view"))
    assert [where.split(":")[0] for where, _ in calls] == ["attnviz/ui/charts.py"], calls  # ui.chart, nothing else
    config = calls[0][1].args[1]
    assert isinstance(config, ast.Call) and getattr(config.func, "id", "") == "chart_config", "config not shared"
    pages = sum("ui.chart(" in p.read_text() for p in ROOT.glob("app_pages/*.py"))
    assert pages >= 10  # the pages do draw through it


def _hex(colour) -> str | None:
    """'#555' / '#262730' / 'black' as '#rrggbb' (None for what is not a plain colour: rgba, a scale)."""
    named = {"black": "#000000", "white": "#ffffff"}
    c = named.get(str(colour).lower(), str(colour).lower())
    if re.fullmatch(r"#[0-9a-f]{3}", c):
        c = "#" + "".join(ch * 2 for ch in c[1:])
    return c if re.fullmatch(r"#[0-9a-f]{6}", c) else None


def _inks(fig: go.Figure):
    """(what, colour) of the text and lines a figure draws in a colour of its style: fonts, annotations, shapes,
    reference lines."""
    yield "font", fig.layout.font.color
    for a in fig.layout.annotations:
        yield f"annotation {a.text!r:.30}", a.font.color
    for shape in fig.layout.shapes:
        yield "shape", shape.line.color
    for t in fig.data:
        if t.type == "scatter" and t.line is not None:
            yield f"line {t.name}", t.line.color


def _luminance(c: str) -> float:
    """WCAG relative luminance of '#rrggbb'."""
    channels = [int(c[i : i + 2], 16) / 255 for i in (1, 3, 5)]
    linear = [v / 12.92 if v <= 0.03928 else ((v + 0.055) / 1.055) ** 2.4 for v in channels]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


def _vanishes_on_the_dark_card(c: str) -> bool:
    """Less than 3:1 contrast against the dark card (WCAG's floor for graphics): text or a line lost on it."""
    card = _luminance(common.DARK_LOOK[common.PAPER])
    return (max(_luminance(c), card) + 0.05) / (min(_luminance(c), card) + 0.05) < 3


def test_every_dark_ink_has_a_colour_on_the_dark_card(drawn):
    mapped = {_hex(c) for c in common.DARK_LOOK}
    missing = set()
    for name, figs in drawn.items():
        for fig in figs:
            for what, colour in _inks(fig):
                c = _hex(colour)
                if c is not None and _vanishes_on_the_dark_card(c) and c not in mapped:
                    missing.add(f"{name}: {what} in {colour}")
    assert not missing, sorted(missing)


def test_the_dark_look_recolours_each_style_colour_as_plotly_writes_it_and_only_on_a_dark_page():
    sheet = ui.screen_look()
    assert sheet.startswith("<style>") and "<script" not in sheet
    for light, dark in common.DARK_LOOK.items():
        r, g, b = (int(light[i : i + 2], 16) for i in (1, 3, 5))
        assert f"fill: rgb({r}, {g}, {b});" in sheet and f"light-dark({light}, {dark})" in sheet, light
    # the paper colour is never taken off text: white numbers on a dark heatmap cell are data
    paper = [line for line in sheet.splitlines() if "fill: rgb(255, 255, 255);" in line]
    assert paper and all(":not(text)" in line for line in paper)
    assert _dark(common.DARK_LOOK[common.PAPER]) and not _dark(common.DARK_LOOK[common.INK])
    for light, dark in common.DARK_LOOK.items():  # what an ink becomes reads on the dark card (the grid stays faint)
        assert light in (common.PAPER, common.GRID) or not _vanishes_on_the_dark_card(dark), (
            light,
            dark,
        )  # grid: faint
    assert _vanishes_on_the_dark_card(common.INK)  # the check can fail: the white card's ink is lost on the dark one


def _zero_colour(trace) -> str | None:
    """'#rrggbb' a heatmap draws a 0 in when 0 is the low end of its range (weights, shares: most cells of a row), as
    Plotly resolves its scale; None for other heatmaps (scores around zmid=0: a diverging scale's pale centre)."""
    if trace.zmin != 0 or trace.zmid is not None or not trace.colorscale:
        return None
    low = str(trace.colorscale[0][1]).replace(" ", "")
    rgb = re.fullmatch(r"rgb\((\d+),(\d+),(\d+)\)", low)
    return "#" + "".join(f"{int(v):02x}" for v in rgb.groups()) if rgb else _hex(low)


def test_no_weight_heatmap_draws_its_zero_cells_white_on_the_dark_card(drawn):
    """Data colours are not recoloured on a dark page: a scale that starts at white (Blues, Greys) would draw every
    zero weight as a white cell on the dark card. Every 0-to-1 heatmap starts dark instead, as WEIGHTS_SCALE does."""
    checked, light = 0, set()
    for name, figs in drawn.items():
        for fig in figs:
            for t in fig.data:
                zero = _zero_colour(t) if t.type == "heatmap" else None
                checked += zero is not None
                if zero is not None and _luminance(zero) > 0.5:
                    light.add(f"{name}: zero in {zero}")
    assert checked >= 10 and "corpus.example_heatmap" in {n for n, figs in drawn.items() if figs}
    assert not light, sorted(light)
    assert _luminance(_zero_colour(go.Heatmap(z=[[0, 1]], zmin=0, zmax=1, colorscale="Blues"))) > 0.5  # can fail


def test_a_figure_is_the_same_whether_plotly_starts_it_on_the_template_or_the_style_sets_it(bundled):
    """The dashboard makes its template Plotly's default (plots.common.template_by_default; 10 ms less a figure):
    figures built through either style path come out the same as a notebook, on Plotly's own default, gets them."""
    from attnviz.plots import heatmaps

    trace = attnviz.trace(bundled, "the cat sat on the mat")
    results = S.ScoreModule.seeded(16, seed=0).all(*S.seeded_queries_keys(6, 16, 0))
    figs = lambda: (heatmaps.head_grid(trace, 0), plots.scores.score_histograms(results))  # noqa: E731
    build = lambda: [json.loads(f.to_json()) for f in figs()]  # noqa: E731 - the same figure, keys in any order
    before = pio.templates.default
    try:
        pio.templates.default = "plotly"
        on_plotly = build()
        common.template_by_default()
        on_ours = build()
    finally:
        pio.templates.default = before
    assert on_plotly[0]["layout"]["template"]["layout"]["plot_bgcolor"] == "white" and on_ours == on_plotly
