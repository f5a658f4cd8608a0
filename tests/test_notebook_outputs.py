"""What attnviz stores in a notebook, without a kernel: one output per figure in plotly's mime type, and a static SVG
beside it whose pixels, marks and text are read back here with independent tools (PIL, xml.etree, plotly.io)."""

from __future__ import annotations

import base64
import html
import io
import json
import subprocess
import sys
import xml.etree.ElementTree as ET

import numpy as np
import plotly.graph_objects as go
import plotly.io as pio
from PIL import Image

import attnviz
from attnviz.notebook import PLOTLY_MIME
from attnviz.static import figure_svg

SVG = "{http://www.w3.org/2000/svg}"


def spec(fig: go.Figure) -> dict:
    return json.loads(pio.to_json(fig, validate=False))  # typed arrays (bdata), as a notebook stores them


def images(svg: str) -> list[np.ndarray]:
    """Every embedded PNG of an SVG, decoded by PIL, as RGBA arrays."""
    root = ET.fromstring(svg)  # well-formed XML, or this raises
    out = []
    for el in root.iter(f"{SVG}image"):
        data = base64.b64decode(el.get("href").split(",", 1)[1])
        out.append(np.asarray(Image.open(io.BytesIO(data)).convert("RGBA")))
    return out


def test_a_heatmap_is_drawn_cell_for_cell_through_its_colour_scale_first_row_on_top():
    z = np.array([[0.0, 0.5], [1.0, np.nan], [0.25, 0.75]], dtype=np.float32)
    fig = go.Figure(go.Heatmap(z=z, colorscale=[[0, "#000000"], [1, "#ffffff"]], zmin=0, zmax=1, showscale=False))
    fig.update_yaxes(autorange="reversed")  # row 0 at the top, as attnviz draws query rows
    (cells,) = images(figure_svg(spec(fig)))
    assert cells.shape == (3, 2, 4)
    expected = np.round(np.nan_to_num(z) * 255)
    np.testing.assert_array_equal(cells[..., 0], expected)  # grey level = z on a black-to-white scale
    np.testing.assert_array_equal(cells[..., 3], np.where(np.isnan(z), 0, 255))  # NaN (masked) cells transparent

    fig.update_yaxes(autorange=True)  # plotly's default: row 0 at the bottom
    (flipped,) = images(figure_svg(spec(fig)))
    np.testing.assert_array_equal(flipped[..., 0], expected[::-1])


def test_a_long_heatmap_is_averaged_to_at_most_256_cells_a_side():
    z = np.tile(np.arange(600, dtype=np.float32) % 2, (600, 1))  # columns alternate 0, 1
    fig = go.Figure(go.Heatmap(z=z, colorscale=[[0, "#000000"], [1, "#ffffff"]], zmin=0, zmax=1))
    cells = images(figure_svg(spec(fig)))[0]
    assert cells.shape[0] <= 256 and cells.shape[1] <= 256
    assert abs(cells[..., 0].mean() - 127.5) < 3  # blocks of 0s and 1s average to mid grey


def test_bars_lines_and_labels_are_drawn_and_every_token_stays_text():
    token = '</svg><script>alert(1)</script> & "x"'
    fig = go.Figure([go.Bar(x=[0, 1, 2], y=[3, 1, 2], name="bars"),
                     go.Scatter(x=[0, 1, 2], y=[1, 2, 3], mode="lines", name="line", showlegend=True)])  # fmt: skip
    label = html.escape(token, quote=False)  # attnviz escapes tokens for plotly, which shows '&lt;' as '<'
    fig.update_xaxes(tickvals=[0, 1, 2], ticktext=["a", "b", label], title_text="key")
    fig.update_layout(title_text="<b>A</b> title", height=300)
    svg = figure_svg(spec(fig))
    root = ET.fromstring(svg)
    assert "<script" not in svg
    texts = ["".join(t.itertext()) for t in root.iter(f"{SVG}text")]
    assert token in texts and "A title" in texts and "key" in texts and "line" in texts  # the text, not markup
    rects = [r for r in root.iter(f"{SVG}rect") if r.get("fill", "").startswith("rgb(")]
    heights = [float(r.get("height")) for r in rects]
    assert len(rects) == 3 and np.allclose(
        np.array(heights) / heights[1], [3, 1, 2], rtol=0.01
    )  # bar heights in proportion
    (line,) = root.iter(f"{SVG}polyline")
    ys = [float(p.split(",")[1]) for p in line.get("points").split()]
    assert ys[0] > ys[1] > ys[2]  # rising values climb the picture


def test_each_figure_is_one_output_in_plotlys_type_with_a_static_picture(bundled):
    trace = attnviz.trace(bundled, "The cat sat on the mat.")
    shown = attnviz.show(trace, "rollout")
    bundles = shown.mimebundles()
    figures = [b for b in bundles if PLOTLY_MIME in b]
    assert len(figures) == len(shown) == 2 and len(bundles) == 1 + 2 * len(shown)  # a heading, then title + figure
    for (title, fig), bundle in zip(shown.items, figures):
        ours = bundle[PLOTLY_MIME]
        assert ours["data"] == spec(fig)["data"] and ours["layout"] == spec(fig)["layout"]  # the figure, unchanged
        assert ours["config"]["displaylogo"] is False and title in bundle["text/plain"]
        assert "<svg" in bundle["text/html"] and "<script" not in bundle["text/html"]
        assert "image/png" not in bundle  # plotly's JupyterLab renderer would show a PNG instead of the figure
    assert "<script" not in shown._repr_html_() and "<svg" in shown._repr_html_()  # HTML-only front ends


KERNEL_LIKE = """
import importlib.util, sys, types, warnings
assert importlib.util.find_spec("ipywidgets") is None  # the case of the red box
sys.modules["ipykernel.zmqshell"] = types.ModuleType("ipykernel.zmqshell")  # what tqdm looks for to detect Jupyter
import IPython
IPython.get_ipython = lambda: types.SimpleNamespace()
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    %s
    import tqdm.auto  # as transformers' hub client imports it
print("notebook" if any(c.__module__ == "tqdm.notebook" for c in tqdm.auto.tqdm.__mro__) else "console", sum("IProgress" in str(w.message) for w in caught))
"""


def kernel_like(first: str) -> str:
    done = subprocess.run([sys.executable, "-c", KERNEL_LIKE % first], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip()


def test_a_kernel_without_ipywidgets_gets_tqdms_console_bar_and_no_warning():
    assert kernel_like("pass") == "console 1"  # without attnviz first: tqdm's 'IProgress not found' warning
    assert kernel_like("import attnviz") == "console 0"  # the same console bar, no warning
