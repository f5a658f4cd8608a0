"""Conventions shared by every figure: safe token labels, colour scales, compact arrays."""

from __future__ import annotations

import functools
import html
import math
import re

import numpy as np
import plotly.graph_objects as go
import plotly.io as pio

from .margins import in_legend, room

WEIGHTS_SCALE = (
    "Viridis"  # sequential, for probabilities 0..1 (set explicitly: Streamlit flips implicit scales in dark mode)
)
SCORES_SCALE = "RdBu_r"  # diverging, for scores that can be negative; centre it with zmid=0
DIFF_SCALE = "PuOr_r"


INK = "#262730"  # dark text and reference lines, Streamlit's own light-theme text colour
PAPER = "#ffffff"
MASKED_BG = "#c8c8c8"  # masked cells are NaN and show the plot background: a flat grey no colour scale uses
GRID = "#ebf0f8"  # plotly_white's grid and zero lines (the template's, named here so the dark look can map it)

#: The look on a dark page: each colour the figure style draws with (as Plotly writes it into the SVG) and what a
#: dark page shows instead. Figures are always built print-ready (the white card, dark ink) because Plotly's modebar
#: download and every export copy the figure's own colours; the dashboard recolours these on screen only
#: (attnviz.ui.charts), so a chart follows the theme and its PNG or SVG stays white. Data colours (the colour scales,
#: bar and line colours) are not in the map: they keep their meaning on both pages.
DARK_LOOK = {
    PAPER: "#14161c",  # the card: a shade lighter than Streamlit's dark page (#0e1117), so it still reads as a card
    INK: "#e6e7eb",  # text, reference lines, outlines
    "#000000": "#e6e7eb",  # a black band or line (the law figure's y = d band)
    GRID: "#2c2f3a",  # grid and zero lines, faint on the dark card as they are on the white one
    "#2a3f5f": "#c9d3e6",  # plotly_white's default for shapes and annotation arrows
}


LEGEND_ABOVE = dict(orientation="h", yanchor="bottom", y=1.1, xanchor="left", x=0)
FONT = dict(size=13)


TEMPLATE = "plotly_white"
STYLE = dict(
    template=TEMPLATE,
    paper_bgcolor=PAPER,
    plot_bgcolor=PAPER,
    font=dict(color=INK, family="'Source Sans', 'Source Sans Pro', sans-serif"),
)
NO_GRID = dict(showgrid=False, zeroline=False)


def template_by_default() -> None:
    """Make every new Plotly figure of this process start on attnviz's template (the dashboard's process, which draws
    nothing else): a template set by name makes Plotly build and validate it again, about 10 ms a figure, while a
    figure starts on the default one for under 1 ms. Not done on import: a notebook's own figures keep its default.
    Set only when it is not already: setting it builds and validates it too (~12 ms of every dashboard run)."""
    if pio.templates.default != TEMPLATE:
        pio.templates.default = TEMPLATE


def _style() -> dict:
    """STYLE, without the template when new figures already start on it (the same figure, 10 ms sooner)."""
    return {k: v for k, v in STYLE.items() if k != "template"} if pio.templates.default == TEMPLATE else STYLE


def on_paper(fig, **layout):
    """THE style rule: every figure attnviz draws goes through here (through `finish`, or `print_ready` for a file),
    after its traces.

    White paper and dark ink whatever the app's theme (pages draw with theme=None), so a figure looks the same on a
    light page, a dark page and a slide, and a PNG from the modebar (which copies the figure's colours;
    toImageButtonOptions cannot change them) is always white with dark text. Heatmaps get no grid or zero lines: a
    light line over the grey of masked cells reads as data (it crossed row 0 of every masked panel).
    """
    fig.update_layout(_merged(_style(), layout))  # `layout` after the style: a masked stage's grey, a font size
    if any(t.type == "heatmap" for t in fig.data):
        fig.update_xaxes(**NO_GRID)
        fig.update_yaxes(**NO_GRID)
    fig.update_annotations(font_color=INK)  # subplot titles and notes in the same ink
    return fig


@functools.cache
def _scale(name: str) -> list:
    """A named colour scale as the list of [position, colour] that validation makes of it (Plotly's own names)."""
    return [list(p) for p in go.Heatmap(colorscale=name).to_plotly_json()["colorscale"]]


def _merged(old: dict, new: dict) -> dict:
    """`old` updated by `new` as Plotly's update_layout does: nested dicts merged, anything else replaced."""
    out = dict(old)
    for k, v in new.items():
        out[k] = _merged(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def _on_paper_dicts(data: list, layout: dict) -> dict:
    """`on_paper`'s rule applied to a layout given as a dict, for a figure whose traces are dicts: the same result,
    before Plotly validates anything (see `finish`)."""
    out = dict(layout)
    if any(trace.get("type") == "heatmap" for trace in data):
        axes = {"xaxis", "yaxis", *(k for k in out if k.startswith(("xaxis", "yaxis")))}  # a Figure always has x, y
        out |= {k: _merged(out.get(k, {}), NO_GRID) for k in axes}
    if "annotations" in out:
        out["annotations"] = [_merged(a, {"font": {"color": INK}}) for a in out["annotations"]]
    return out


#: The strip at the top of every card that Plotly's toolbar (the modebar) covers on hover: no title, subplot title or
#: legend is drawn there (the Score functions panels' titles and the Scaling and Masks titles were hidden under it).
MODEBAR = 28


def finish(fig, name: str, height: int, top: int = 80, margin=None, meta=None, **layout) -> go.Figure:
    """THE finishing step every figure builder ends in: on_paper's style, the figure's name (layout.meta["figure"]),
    its height, and margins with the room its labels, colour bars and legend take (margins.room), so Plotly lays
    it out in one pass. No builder sets its own margins after this.

    `fig`: a Figure, or a figure as plain dicts ({"data": [trace dicts], "layout": {...}}): figures of many traces or
    axes (the Heads grid, the Score functions panels) are built that way, in the form Plotly's validation gives, and
    not validated (Plotly's per-axis and per-trace updates cost more than the rest of such a figure, and validating
    the whole of the Heads grid at once 20 ms of its 21). `top`: the room above the
    plot below the toolbar's strip (a title, a legend above subplot titles); `margin`: the least room on any side
    (l, r, t, b; the others 10 and `top`), each side then grown to what its labels take; `meta`: more facts for tests
    and exports; a legend sits above the plot unless given."""
    margin = dict(l=10, r=10, t=top, b=10) | (margin or {})
    margin["t"] += MODEBAR  # the toolbar's strip: text below it, the plot as tall as asked
    plain = isinstance(fig, dict)
    data = fig["data"] if plain else fig.data
    legend = {"legend": LEGEND_ABOVE} if any(map(in_legend, data)) else {}  # none drawn: 1 ms less to validate
    layout = _merged(_style(), {"font": FONT} | legend | layout)
    layout |= dict(height=height + MODEBAR, margin=margin, meta={"figure": name, **(meta or {})})
    whole = _merged(fig["layout"] if plain else fig.layout.to_plotly_json(), layout)  # the layout it will have
    need = room({"data": data, "layout": whole})  # the room its labels, colour bars and legend take: one layout pass
    layout["margin"] = margin | {side: max(margin[side], px) for side, px in need.items()}
    title = whole.get("title")  # one pinned to the card's top edge goes below the strip too
    if isinstance(title, dict) and title.get("text") and title.get("yref") == "container":
        layout = _merged(layout, {"title": {"pad": {"t": ((title.get("pad") or {}).get("t") or 0) + MODEBAR}}})
    if plain:  # written in Plotly's own form, so not validated (test_one_style: validating it changes nothing)
        if isinstance(layout.get("template"), str):  # by name (a notebook's figures): the template itself
            layout["template"] = pio.templates[layout["template"]]
        data = [
            t | {"colorscale": _scale(t["colorscale"])} if isinstance(t.get("colorscale"), str) else t for t in data
        ]
        for k in [k for k in layout if k.startswith("coloraxis") and isinstance(layout[k].get("colorscale"), str)]:
            layout[k] = layout[k] | {"colorscale": _scale(layout[k]["colorscale"])}
        return go.Figure(
            {"data": data, "layout": _on_paper_dicts(data, _merged(fig["layout"], layout))}, _validate=False
        )
    return on_paper(fig, **layout)  # one layout update: the style is in `layout` already


def escape(token: str) -> str:
    """Make a token safe for Plotly labels, which parse <br>, <b>, <a href> and entities.

    Quotes are left alone: outside a tag they are plain text, and Plotly shows `&quot;` literally."""
    return html.escape(str(token), quote=False)


def _byte_alphabet() -> dict[str, int]:
    """Byte-level BPE's alphabet (GPT-2, RoBERTa, Llama 3...): each of the 256 bytes drawn as one printable character.
    Printable Latin-1 bytes stand for themselves; the others (space, newline, control bytes) are shifted to U+0100
    and up, which is why a space shows as "Ġ" and a newline as "Ċ"."""
    kept = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    shifted = [b for b in range(256) if b not in kept]
    return {chr(b): b for b in kept} | {chr(256 + n): b for n, b in enumerate(shifted)}


_BYTES = _byte_alphabet()
_SHIFTED = frozenset(c for c, b in _BYTES.items() if ord(c) != b)  # the characters only byte-level BPE writes
_VISIBLE = {" ": "·", "▁": "·", "\n": "↵", "\r": "␍", "\t": "⇥"}  # SentencePiece's ▁ is its space


def _utf8_length(lead: int) -> int:
    """How many bytes the UTF-8 character that starts with byte `lead` takes (1 for a byte no character starts with)."""
    return 2 if 0xC0 <= lead < 0xE0 else 3 if 0xE0 <= lead < 0xF0 else 4 if 0xF0 <= lead < 0xF8 else 1


def _unbyte_all(tokens: list[str]) -> list[str]:
    """Byte-level BPE tokens as the text they stand for. A character whose UTF-8 bytes are split over n tokens (é, a
    curly quote, an emoji) is shown whole in each of them, marked 'é(1/2)', 'é(2/2)': a lone byte has no text of its
    own, and '\\x94' meant nothing to a reader. A byte that belongs to no character keeps its \\x escape."""
    out = ["" if all(c in _BYTES for c in t) else t for t in tokens]  # an added token (<|endoftext|>) is text already
    flat = [(i, _BYTES[c]) for i, t in enumerate(tokens) if out[i] == "" for c in t]
    p = 0
    while p < len(flat):
        size = _utf8_length(flat[p][1])
        run = flat[p : p + size]
        try:  # the bytes must follow each other without an added token between them
            consecutive = run[-1][0] - run[0][0] == len({i for i, _ in run}) - 1
            char = bytes(b for _, b in run).decode("utf-8") if len(run) == size and consecutive else None
        except UnicodeDecodeError:
            char = None
        if char is None:
            out[flat[p][0]] += bytes([flat[p][1]]).decode("utf-8", errors="backslashreplace")
            p += 1
            continue
        owners = sorted({i for i, _ in run})
        for k, i in enumerate(owners, start=1):
            out[i] += char if len(owners) == 1 else f"{char}({k}/{len(owners)})"
        p += size
    return out


def _visible(text: str) -> str:
    return "".join(_VISIBLE.get(c, c if c.isprintable() else f"\\x{ord(c):02x}") for c in text)


#: The most characters a tick label shows (a '0123 ' position prefix included).
LONGEST_LABEL = 24


def readable_tokens(tokens) -> list[str]:
    """Tokens as a reader wants them on an axis, in hover and in tables: byte-level BPE decoded ("Ġcat" -> "·cat",
    "Ċ" -> "↵", "Ã©" -> "é", "Ã" "©" -> "é(1/2)" "é(2/2)"), SentencePiece's "▁" as "·", other whitespace and control
    characters made visible.

    Byte-level BPE is recognised over the whole list (any token holding a character only its alphabet uses), so
    call this on every token of a text and slice afterwards. Not escaped for Plotly: `tick_labels` does that."""
    tokens = [str(t) for t in tokens]
    byte_level = any(c in _SHIFTED for t in tokens for c in t)
    return [_visible(t) for t in (_unbyte_all(tokens) if byte_level else tokens)]


def numbered(tokens) -> list[str]:
    """'%02d token' labels for widgets and tables (Markdown-free places): readable tokens, not escaped."""
    width = max(2, len(str(len(tokens) - 1)))
    return [f"{i:0{width}d} {t}" for i, t in enumerate(readable_tokens(tokens))]


def tick_labels(tokens) -> list[str]:
    """'%03d token' labels so repeated tokens ("the" twice) stay separate positions; readable and escaped."""
    return [escape(label) for label in numbered(tokens)]


def f32(a) -> np.ndarray:
    """Plotly sends float32 as compact base64 typed arrays (float16 and float64 fall back or bloat)."""
    return np.ascontiguousarray(a, dtype=np.float32)


def symmetric_range(a: np.ndarray) -> float:
    """Half-width of a colour range centred on 0 that covers the finite values of `a`."""
    finite = np.abs(a[np.isfinite(a)])
    return float(finite.max()) if finite.size else 1.0


def thin(n: int, most: int) -> int:
    """The step that labels at most `most` of `n` positions (every position when they fit)."""
    return max(1, math.ceil(n / most))


IMAGE_FORMATS = ("png", "svg")


def chart_config(*parts, fmt: str = "png") -> dict:
    """Plotly modebar config: the camera button saves an image (`fmt`: png or svg) named after what it shows
    (attnviz_layer2_head3_weights)."""
    name = "_".join(["attnviz", *(str(p) for p in parts if p not in (None, ""))])
    name = re.sub(r"[^A-Za-z0-9_.-]+", "-", name)[:120]
    fmt = fmt if fmt in IMAGE_FORMATS else "png"
    # width/height None: the file has the chart's size on screen. Left out, Plotly redraws it 700 px wide, which
    # wrapped the Scaling legends onto the subplot titles; the colours are the figure's own (the white card).
    image = {"format": fmt, "filename": name, "scale": 2 if fmt == "png" else 1, "width": None, "height": None}
    return {
        "displaylogo": False,
        "toImageButtonOptions": image,
        "modeBarButtonsToRemove": ["lasso2d", "select2d"],
    }


MAX_TICKS = 40  # more labels than this on one axis become unreadable: label every n-th position


def ticks(tokens=None, start: int = 0, stop: int | None = None, most: int = MAX_TICKS, labels=None) -> dict:
    """THE tick-label helper: positions [start, stop) labelled '%03d token' (repeated tokens stay apart), every n-th
    one when more than `most` would crowd the axis, each cut to LONGEST_LABEL characters. `labels`: ready-made labels
    (one per position) instead of tokens, shown whole.
    """
    cut = short_label if labels is None else str  # token labels are cut (a long one ran into the axis title)
    labels = tick_labels(tokens) if labels is None else list(labels)
    stop = len(labels) if stop is None else stop
    vals = list(range(start, stop, thin(stop - start, most)))
    return dict(tickmode="array", tickvals=vals, ticktext=[cut(labels[i]) for i in vals])


def short_label(label: str, most: int = LONGEST_LABEL) -> str:
    """An escaped tick label cut to `most` characters with "…" (a long merged word or code token ran into the axis
    title); never inside an entity such as &lt;. The hover keeps the whole label."""
    if len(label) <= most:
        return label
    cut = label[: most - 1]
    amp = cut.rfind("&")
    if amp >= 0 and ";" not in cut[amp:]:  # the cut fell inside an entity
        cut = cut[:amp]
    return cut + "…"


def token_axes(fig: go.Figure, tokens, row: int, col: int, **options) -> None:
    """`token_axes_layout(tokens, **options)`'s axes set on one subplot of `fig`."""
    x, y = token_axes_layout(tokens, **options)
    fig.update_xaxes(x, row=row, col=col)
    fig.update_yaxes(y, row=row, col=col)


def token_axes_layout(
    tokens, show_y: bool = True, max_labels: int = 32, start: int = 0, stop=None, key_tokens=None
) -> tuple[dict, dict]:
    """(x, y): token axes (`token_axis`: category i is token i) with thinned labels for one panel; query 0 at the top;
    the hover names every token from the axes' categories (no label per cell: see `heatmap`). As dicts in Plotly's
    own form (a figure built as dicts takes them as they are; see finish).

    [start, stop): the window of positions drawn (the whole text by default). key_tokens: cross-attention's keys
    (another text, always drawn whole); None: the keys are the query tokens.
    """
    stop = len(tokens) if stop is None else stop
    font = dict(tickfont=dict(size=11 if max_labels >= 32 else 10))
    # slanted key labels need ~17 px each and panels side by side are narrow; a long text's 4-digit labels ("0126 mat")
    # need more room still, so a window of more than 24 keys gets half as many labels as the queries
    most = max(4, max_labels * 3 // 4 if stop - start <= 24 else max_labels // 2)
    k0, k1, key_text = (start, stop, tokens) if key_tokens is None else (0, len(key_tokens), key_tokens)
    keys = token_axis(key_text, k0, k1, most) | dict(range=[k0 - 0.5, k1 - 0.5])
    queries = token_axis(tokens, start, stop, max_labels) | font | dict(range=[stop - 0.5, start - 0.5])
    x = keys | font | dict(tickangle=-60, title=dict(text="key"))
    y = queries | dict(showticklabels=show_y) | (dict(title=dict(text="query")) if show_y else {})  # query 0 on top
    return x, y


def token_axis(tokens, start: int, stop: int, max_ticks: int) -> dict:
    """A category axis whose category i is token i (labelled '%03d token'), so positions [start, stop) keep
    their numeric coordinates (ranges and shapes) while the hover names the token. Categories before `start`
    get short placeholder names."""
    labels = tick_labels(tokens)
    shown = [labels[i] for i in ticks(labels=labels, start=start, stop=stop, most=max_ticks)["tickvals"]]
    return dict(
        type="category",
        categoryorder="array",
        categoryarray=[str(i) for i in range(start)] + labels[start:stop],
        tickmode="array",
        tickvals=shown,
        ticktext=[short_label(s) for s in shown],
    )


# --- figures ----------------------------------------------------------------------------------------


def grid_height(n_tokens: int, n_cols: int) -> int:
    """A height that makes cells roughly square at a typical page width, without the blank band that
    axis-locked squares leave when the page is narrower or wider than expected."""
    plot = np.clip(n_tokens * (18 if n_cols == 2 else 14), 260 if n_cols == 2 else 220, 420 if n_cols == 2 else 280)
    return int(plot) + (190 if n_cols == 2 else 160)


def heatmap(z, tokens, coloraxis: str, what: str, name: str, start: int = 0, key_tokens=None) -> go.Heatmap:
    """One [query, key] heatmap of positions start.. of `tokens`, on `token_axes`: its x and y are the tokens' labels
    (categories), so the hover names both tokens with one label per row and column, not a pair per cell.
    key_tokens: cross-attention's keys (all of them, from position 0); None: `tokens` again."""
    T = len(z)
    queries = tick_labels(tokens)[start : start + T]
    keys = queries if key_tokens is None else tick_labels(key_tokens)
    return go.Heatmap(
        z=f32(z),
        x=keys,
        y=queries,
        coloraxis=coloraxis,
        hoverongaps=False,
        name=name,
        hovertemplate=f"query %{{y}} → key %{{x}}<br>{what} %{{z:.3f}}<extra></extra>",
    )


def colorbar(title: str, x: float = 1.0) -> dict:
    """A colour bar next to the top-aligned square heatmaps, not stretched over the tick labels below them."""
    return dict(title=dict(text=title, side="right"), x=x, y=1.0, yanchor="top", len=0.75, thickness=14)  # beside
    # its bar: a title on top sat on the "1" tick


def weights_axis(x: float = 1.0, title: str = "weight") -> dict:
    return dict(colorscale=WEIGHTS_SCALE, cmin=0.0, cmax=1.0, colorbar=colorbar(title, x))


def print_ready(fig):
    """A copy of `fig` for files, through the same rule as the screen (a figure built elsewhere gets the white card
    too); a masked stage keeps its grey plot background."""
    return on_paper(go.Figure(fig), plot_bgcolor=fig.layout.plot_bgcolor or PAPER)


# --- long charts: at most LONG_CHART positions along a line or strip ----------------------------------------

LONG_CHART = 64  # more points than this on a line or strip chart read as a zig-zag or a barcode


def group_edges(n: int, most: int = LONG_CHART) -> np.ndarray:
    """Edges of at most `most` consecutive, near-equal groups of n positions (one position per group if n <= most)."""
    return np.unique(np.linspace(0, n, min(n, most) + 1).round().astype(int))


def group(values: np.ndarray, edges: np.ndarray, how: str = "mean") -> np.ndarray:
    """Reduce the last axis of `values` to one number per group: its "mean", "sum", "min" or "max"."""
    v = np.asarray(values, dtype=np.float64)
    fn = {"mean": np.add, "sum": np.add, "min": np.minimum, "max": np.maximum}[how]
    out = fn.reduceat(v, edges[:-1], axis=-1)
    return out / np.diff(edges) if how == "mean" else out


def group_labels(tokens, edges: np.ndarray) -> list[str]:
    """'%03d token' for single positions, '007–013' for groups."""
    labels = tick_labels(tokens)
    width = max(2, len(str(len(tokens) - 1)))
    return [labels[a] if b - a == 1 else f"{a:0{width}d}–{b - 1:0{width}d}" for a, b in zip(edges[:-1], edges[1:])]


def group_note(n: int, edges: np.ndarray, what: str, how: str, item: str = "point") -> str:
    """A sentence saying how n positions were grouped ('' when they were not)."""
    if len(edges) - 1 == n:
        return ""
    size = int(np.diff(edges).max())
    return (
        f"{n} {what} in {len(edges) - 1} groups of up to {size} consecutive {what}: each {item} is the group's {how}."
    )
