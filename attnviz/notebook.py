"""attnviz in a notebook: a trace draws itself, and `show` draws any dashboard page's figures inline.

In Jupyter (JupyterLab, VS Code, Colab, nbconvert) each figure is its own output in plotly's notebook mime type
(`application/vnd.plotly.v1+json`): the figure's JSON only. The front end draws it with the plotly.js it ships
(plotly's JupyterLab renderer is inside the `plotly` package), without trusting the notebook, so a notebook executed
elsewhere (nbconvert, a course handout) draws in JupyterLab, and plotly.js is not stored in every output. Beside it,
each output carries a static picture of the figure (text/html: an inline SVG, no script; attnviz.figure_svg) for
viewers that run nothing and do not know plotly's type (nbviewer, GitHub, a notebook exported to HTML).

`Figures.to_html` / `save` still write one self-contained interactive page: plotly.js travels with it once,
gzip-compressed and base64-coded, inflated by the browser with DecompressionStream; nothing is fetched from any host.
"""

from __future__ import annotations

import base64
import functools
import gzip
import html
import itertools
import json
from dataclasses import dataclass
from pathlib import Path

import plotly.graph_objects as go
import plotly.io as pio
import plotly.offline

from . import checks
from .analysis import compare, geometry, heads, values, words
from .checks.objects import instance
from .figures import page_figures
from .plots.colours import COLOUR_RANGES
from .plots.common import chart_config
from .static import static_html
from .trace import NOTEBOOK_VIEW, STAGES, AttentionTrace

_IDS = itertools.count()
PLOTLY_MIME = "application/vnd.plotly.v1+json"  # plotly's own notebook type: JupyterLab, VS Code, Colab draw it

# Reads its own output's data, inflates plotly.js once per page (a copy already inflated is reused), draws.
_DRAW = """(function () {
  var root = document.getElementById("%(id)s");
  var figures = JSON.parse(root.querySelector("script.attnviz-figures").textContent);
  function draw(Plotly) {
    root.querySelectorAll("div.attnviz-figure").forEach(function (el, i) {
      Plotly.newPlot(el, figures[i].data, figures[i].layout, figures[i].config);
    });
  }
  function inflate() {
    var text = atob(root.querySelector("script.attnviz-plotlyjs").textContent);
    var bytes = new Uint8Array(text.length);
    for (var i = 0; i < text.length; i++) bytes[i] = text.charCodeAt(i);
    var stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
    return new Response(stream).text().then(function (code) {
      window.PlotlyConfig = {MathJaxConfig: "local"};
      (new Function(code))();  /* plotly.js sets window.Plotly */
      return window.Plotly;
    });
  }
  if (!window.attnvizPlotly || window.attnvizPlotlyVersion !== "%(version)s") {
    window.attnvizPlotly = inflate();
    window.attnvizPlotlyVersion = "%(version)s";
  }
  window.attnvizPlotly.then(draw).catch(function (e) {
    root.appendChild(document.createTextNode("attnviz could not draw these figures: " + e));
  });
})();"""

_STYLE = (
    "<style>.attnviz-output{font-family:system-ui,sans-serif;color:#262730;background:#fff;padding:4px}"
    ".attnviz-output h4{margin:14px 0 2px;font-size:15px}.attnviz-output .attnviz-note{font-size:13px;color:#555}"
    ".attnviz-figure{width:100%}</style>"
)


@functools.cache
def plotlyjs_gzip_base64() -> str:
    """plotly.js as shipped with the plotly package, gzip-compressed and base64-coded (computed once)."""
    return base64.b64encode(gzip.compress(plotly.offline.get_plotlyjs().encode(), 9, mtime=0)).decode("ascii")


def _figure_json(fig: go.Figure, name: str) -> dict:
    out = json.loads(pio.to_json(fig, validate=False))  # numpy arrays as compact typed arrays (bdata)
    return {
        "data": out.get("data", []),
        "layout": out.get("layout", {}),
        "config": chart_config(name) | {"responsive": True},
    }


def _script_json(value) -> str:
    """JSON safe inside a <script> element: no '<' can close it early (tokens may hold '</script>')."""
    return json.dumps(value, separators=(",", ":")).replace("<", "\\u003c").replace("&", "\\u0026")


@dataclass(frozen=True)
class Figures:
    """Figures shown in a notebook, one output each (`_ipython_display_`); `figures` are the plotly figures."""

    items: tuple[tuple[str, go.Figure], ...]
    heading: str = ""

    @property
    def figures(self) -> list[go.Figure]:
        return [fig for _, fig in self.items]

    @property
    def titles(self) -> list[str]:
        return [title for title, _ in self.items]

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, i) -> go.Figure:
        return self.items[i][1]

    def __repr__(self) -> str:
        return f"Figures({', '.join(self.titles)})"

    def mimebundles(self) -> list[dict]:
        """What a notebook stores, in order: the heading, then per figure a title and the figure itself (plotly's
        mime type, a static picture in text/html for viewers that run nothing, and text)."""
        out = [_text_bundle(self.heading, "attnviz-note")] if self.heading else []
        for title, fig in self.items:
            spec = _figure_json(fig, title)
            out.append(_text_bundle(title, "attnviz-title"))
            out.append({PLOTLY_MIME: spec, "text/html": static_html(spec), "text/plain": f"<figure: {title}>"})
        return out

    def _ipython_display_(self) -> None:
        from IPython.display import display  # only ever called by IPython, so it is there

        for bundle in self.mimebundles():
            display(bundle, raw=True)

    def _repr_html_(self) -> str:
        """For front ends that take HTML only: the static pictures with their headings (no script)."""
        return "\n".join(b["text/html"] for b in self.mimebundles())

    def to_html(self) -> str:
        """One self-contained HTML fragment: headings, figure boxes, their data, plotly.js once, the drawing script."""
        uid = f"attnviz-{next(_IDS)}-{id(self):x}"
        parts = [f'<div class="attnviz-output" id="{uid}">', _STYLE]
        if self.heading:
            parts.append(f'<div class="attnviz-note">{html.escape(self.heading)}</div>')
        data = []
        for title, fig in self.items:
            data.append(_figure_json(fig, title))
            height = int(fig.layout.height or 450)
            parts.append(f"<h4>{html.escape(title)}</h4>")
            parts.append(f'<div class="attnviz-figure" style="height:{height}px"></div>')
        parts.append(f'<script type="application/json" class="attnviz-figures">{_script_json(data)}</script>')
        parts.append(f'<script type="text/plain" class="attnviz-plotlyjs">{plotlyjs_gzip_base64()}</script>')
        version = html.escape(plotly.__version__)
        parts.append(f"<script>{_DRAW % {'id': uid, 'version': version}}</script></div>")
        return "\n".join(parts)

    def save(self, path) -> Path:
        """The same output as a complete HTML page (opens offline in any browser)."""
        path = Path(path)
        title = html.escape(self.titles[0] if self.items else "attnviz")
        page = f'<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>{title}</title></head><body>'
        path.write_text(page + self.to_html() + "</body></html>\n", encoding="utf-8")
        return path


def _text_bundle(text: str, kind: str) -> dict:
    """A line of text as its own output (a heading above a figure): escaped HTML, and the text itself."""
    style = "font-weight:600;font-size:15px;margin:10px 0 0" if kind == "attnviz-title" else "font-size:13px"
    return {"text/html": f'<div class="{kind}" style="{style}">{html.escape(text)}</div>', "text/plain": text}


def summary(trace: AttentionTrace) -> str:
    """One line on what a trace is: model, tokens, layers x heads, the stages it holds."""
    model = trace.model_name or trace.provenance.kind
    return (
        f"{model}: {trace.n_tokens} tokens, {trace.n_layer} layers × {trace.n_head} heads, "
        f"stages: {', '.join(trace.available_stages)}"
    )


def show(trace: AttentionTrace, page: str = "heads", layer: int = 0, head: int = 0, **options) -> Figures:
    """The figures of one dashboard page for `trace`, drawn inline in a notebook.

    page: heads, scaling, masks, headstats, rollout, neuron, words, pairs, compare or geometry (see attnviz.figures
    for each page's own options, e.g. stage= on heads, scale= on scaling, unmasked= on masks, other= on compare,
    method= and colour= on geometry, query= on rollout (attention flow), view="value-weighted" on headstats, words,
    pairs and compare). The dashboard's page draws the same figures from the same call.
    """
    instance("trace", trace, AttentionTrace, "an AttentionTrace (from attnviz.trace)")
    for name, value in options.items():  # an option no page takes: page_figures says which the page takes
        if name in OPTIONS and value is not None:
            OPTIONS[name](trace, name, value)
    return Figures(tuple(page_figures(trace, page, layer, head, **options)), summary(trace))


def _trace_or_none(trace, name, value):
    return instance(name, value, AttentionTrace, "an AttentionTrace (from attnviz.trace)")


def _among(options):
    return lambda trace, name, value: checks.choice(name, value, tuple(options))


#: The pages' own options (attnviz.figures), each checked before anything is drawn; None means the page's default.
OPTIONS = {
    "stage": _among(STAGES),
    "colours": _among(COLOUR_RANGES),
    "scale": lambda t, name, v: checks.number(name, v, nonzero=True, high=1e4),  # as attnviz.trace's scale
    "all_heads": lambda t, name, v: checks.flag(name, v),
    "unmasked": _trace_or_none,
    "other": _trace_or_none,
    "statistic": _among(heads.STATISTICS),
    "special": lambda t, name, v: checks.tokens(name, v),
    "view": _among(values.VIEWS),
    "start": lambda t, name, v: checks.whole(name, v, low=0, high=t.n_layer - 1),
    "end": lambda t, name, v: checks.whole(name, v, low=0, high=t.n_layer - 1),
    "query": lambda t, name, v: checks.check_index(name, v, t.n_tokens),
    "scheme": _among(words.SCHEMES),
    "other_layer": lambda t, name, v: checks.check_index(name, v, t.n_layer),
    "measure": _among(compare.MEASURES),
    "method": _among(geometry.METHODS),
    "colour": _among(geometry.COLOURS),
    "normalised": lambda t, name, v: checks.flag(name, v),
}


def trace_view(trace: AttentionTrace) -> Figures:
    """What a trace shows in a notebook: every head of layer 0, head 0 up close and every layer x head."""
    return show(trace, "heads")


NOTEBOOK_VIEW[:] = [trace_view]  # a trace draws itself in a notebook with it from now on
