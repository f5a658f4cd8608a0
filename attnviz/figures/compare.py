"""The figures of the pages that set two things side by side: Compare (b − a per head) and the query-key space."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..analysis import compare as C
from ..analysis import geometry as GE
from ..analysis.compare import Comparison
from ..analysis.geometry import Geometry
from ..errors import InputError
from ..plots import compare as cp
from ..plots import geometry as gp
from ..plots import heatmaps as hm
from ..trace import AttentionTrace
from .drawn import Drawn


@dataclass(frozen=True)
class Compared(Drawn):
    """`result`: b − a and every head's change; `table`: the page's rows, most changed head first."""

    result: Comparison | None = field(default=None)
    table: list = field(default_factory=list)


def compare(
    trace: AttentionTrace,
    layer: int = 0,
    head: int = 0,
    other: AttentionTrace | None = None,
    other_layer: int | None = None,
    measure: str = "mean_abs",
    view: str = "weights",
    pooled: bool = False,
    what: str | None = None,
    boundary: int | None = None,
    token_range=None,
) -> Compared:
    """b − a per head (b: `other`, a minimal pair or a second model, or `other_layer` of this trace), most
    changed head first; of `view` ("weights", or "value-weighted" when both traces keep values). pooled: each side's
    heads averaged first (models of different head counts); what: the two things compared, for error messages;
    boundary: where sentence B starts; token_range: the tokens drawn (a range or plots.heatmaps.Window)."""
    if measure not in C.MEASURES:
        raise InputError(f"unknown measure {measure!r}; choose one of {', '.join(C.MEASURES)}.")
    b = trace if other is None else other
    other_layer = (layer + 1) % trace.n_layer if other is None and other_layer is None else other_layer
    what = what or ("two layers" if other is None else "two traces")
    drawn = hm.windows(trace, token_range)  # queries and keys apart, as on the Heads page
    result = C.compare_traces(trace, b, layer, other_layer, what, view, pooled=pooled, window=drawn)
    order = result.ranked(measure)
    change = result.change[measure]
    titles = [f"#{r + 1}: head {h} ({C.short_number(change[h])})" for r, h in enumerate(order)]
    drawn_view = "weights" if view == "weights" else "value-weighted attention"
    title = f"b − a of the {drawn_view}, heads from most to least changed ({C.MEASURES[measure]})"
    if pooled:
        titles = [f"heads averaged ({C.short_number(change[0])})"]
        title = f"b − a of the {drawn_view}, each side's heads averaged ({C.MEASURES[measure]})"
    title += hm.range_note(trace.n_tokens, trace.n_keys, *drawn)
    grid = cp.diff_grid(
        result.diff,
        trace.tokens,
        title,
        order,
        labels=titles,
        boundary=boundary,
        window=drawn,
        key_tokens=trace.key_tokens,
        view=view,
    )
    return Compared(((title, grid),), result, result.rows(measure))


@dataclass(frozen=True)
class QueryKeySpace(Drawn):
    """`geometry`: the head's projected queries and keys, with how far their distances can be trusted."""

    geometry: Geometry | None = field(default=None)


def geometry(
    trace: AttentionTrace,
    layer: int = 0,
    head: int = 0,
    method: str = "pca",
    colour: str = "position",
    normalised: bool = True,
) -> QueryKeySpace:
    """One head's queries and keys in one space (AttentionViz), then every head of the layer as small multiples (PCA).
    method: pca, umap or tsne; colour: position, token, sentence or role; normalised=False shows the raw vectors."""
    if colour not in GE.COLOURS:
        raise InputError(f"unknown colour {colour!r}; choose one of {', '.join(GE.COLOURS)}.")
    geo = GE.head_geometry(trace, layer, head, method, normalised)
    groups = {"sentence": GE.sentence_groups, "role": GE.role_groups}.get(colour, lambda t: None)(trace)
    title = geometry_title(geo, layer, head, normalised)
    panels = GE.layer_geometry(trace, layer)
    space = gp.query_key_space(geo, trace.tokens, trace.key_tokens, colour, groups, title)
    out = (
        (title, space),
        (f"Every head of layer {layer} (PCA, normalised)", gp.head_panels(panels, trace.tokens, trace.key_tokens)),
    )
    return QueryKeySpace(out, geo)


def geometry_title(geo, layer: int, head: int, normalised: bool) -> str:
    """What the picture is and how far its distances can be trusted, in one line."""
    which = "normalised" if normalised else "raw"
    return (
        f"Layer {layer}, head {head}: queries and keys ({which}, {GE.METHODS[geo.method]}); q·k vs −distance: "
        f"r = {geo.before:.2f} raw, {geo.after:.2f} normalised"
    )
