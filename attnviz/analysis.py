"""Numbers behind the Scaling and Masks pages: pure numpy functions of an AttentionTrace.

No streamlit, no plotly. Anything softmax-shaped goes through the package's own stage math
(`AttentionTrace.recompute`, `attnviz.stages_from_scores`), so what the pages show is what the
model computes, not a second implementation that could drift from it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import torch

from .attention import FILLS, Stages, stages_from_scores
from .scaling import LawRow, sqrt_d_law
from .trace import AttentionTrace

# --- distributions -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Histogram:
    """Counts of the finite values of a stage, binned server-side (millions of scores never reach the browser)."""

    counts: np.ndarray  # [bins] int64
    edges: np.ndarray  # [bins + 1] float64
    n: int  # finite values counted (= counts.sum())
    mean: float
    var: float

    @property
    def centers(self) -> np.ndarray:
        return (self.edges[:-1] + self.edges[1:]) / 2

    @property
    def width(self) -> float:
        return float(self.edges[1] - self.edges[0])


def histogram(values, bins: int = 60, value_range: tuple[float, float] | None = None) -> Histogram:
    """Histogram of the finite entries of `values` (-inf fills and NaN are left out), with their mean and variance."""
    v = np.asarray(values, dtype=np.float64).ravel()
    v = v[np.isfinite(v)]
    if v.size == 0:
        return Histogram(np.zeros(bins, np.int64), np.linspace(-1.0, 1.0, bins + 1), 0, math.nan, math.nan)
    lo, hi = value_range if value_range is not None else (float(v.min()), float(v.max()))
    if not hi > lo:  # all values equal: give the single bar some width
        lo, hi = lo - 0.5, hi + 0.5
    counts, edges = np.histogram(v, bins=bins, range=(lo, hi))
    return Histogram(counts.astype(np.int64), edges, int(v.size), float(v.mean()), float(v.var()))


def normal_curve(hist: Histogram, var: float, mean: float = 0.0, points: int = 200) -> tuple[np.ndarray, np.ndarray]:
    """N(mean, var) as expected counts per bin of `hist`, so it overlays the bars on the same y axis."""
    x = np.linspace(hist.edges[0], hist.edges[-1], points)
    if not (var > 0 and np.isfinite(var)):
        return x, np.zeros_like(x)
    pdf = np.exp(-((x - mean) ** 2) / (2 * var)) / math.sqrt(2 * math.pi * var)
    return x, pdf * hist.n * hist.width


def row_max(weights: np.ndarray) -> np.ndarray:
    """Largest weight of every row (near 1: the softmax picked one key, i.e. it saturated)."""
    return np.asarray(weights).max(axis=-1)


def row_entropy(weights: np.ndarray) -> np.ndarray:
    """Entropy of every row in nats: log(n_keys) for a uniform row, 0 for a one-hot row, 0 for an all-zero row."""
    p = np.asarray(weights, dtype=np.float64)
    return -(p * np.log(np.where(p > 0, p, 1.0))).sum(axis=-1)


# --- the divisor what-if (Scaling page) ------------------------------------------------------------------


def model_divisor(trace: AttentionTrace, layer: int) -> float:
    """What the model divided this layer's scores by (1 / scale): sqrt(d_head) for BERT, 1 for T5-style models."""
    return float(1.0 / trace.scale[layer])


def divisor_stops(d_head: int, model: float | None = None) -> list[float]:
    """Divisors from 1 through sqrt(d) to d: powers of two, sqrt(d) and the model's own divisor."""
    d = max(1, int(d_head))
    stops = {float(2**i) for i in range(int(math.log2(d)) + 1)} | {1.0, float(d), round(math.sqrt(d), 6)}
    if model is not None and np.isfinite(model) and model > 0:
        stops.add(round(float(model), 6))
    return sorted(stops)


def divisor_label(x: float, d_head: int, model: float | None = None) -> str:
    """Short, URL-friendly stop labels: '1', '√32 ≈ 5.66', '32'; a model divisor off the usual stops says so."""
    if abs(x - math.sqrt(d_head)) < 1e-6 and abs(x - round(x)) > 1e-6:
        return f"√{d_head} ≈ {x:.2f}"
    text = f"{x:g}" if abs(x - round(x)) < 1e-6 else f"{x:.3g}"
    named = abs(x - math.sqrt(d_head)) < 1e-6 or abs(x - round(x)) < 1e-6
    return text + (" (model)" if model is not None and abs(x - model) < 1e-6 and not named else "")


@dataclass(frozen=True)
class ScalingComparison:
    """softmax(scores) next to softmax(scores / divisor) for one layer, on one head or all heads.

    Arrays are [head, query, key] (or [head, query] for the row measures), restricted to the chosen heads.
    `raw` is divisor 1; `divided` is the chosen divisor; both are trace.recompute, so the mask is applied as captured.
    """

    divisor: float
    model_divisor: float
    heads: tuple[int, ...]
    raw: Stages
    divided: Stages
    hist_scores: Histogram
    hist_scaled: Histogram

    @property
    def max_raw(self) -> np.ndarray:
        return row_max(self.raw.weights)

    @property
    def max_divided(self) -> np.ndarray:
        return row_max(self.divided.weights)

    @property
    def entropy_raw(self) -> np.ndarray:
        return row_entropy(self.raw.weights)

    @property
    def entropy_divided(self) -> np.ndarray:
        return row_entropy(self.divided.weights)


def compare_divisor(
    trace: AttentionTrace, layer: int, divisor: float, head: int | None = None, bins: int | None = None
) -> ScalingComparison:
    """Cheap what-if: re-derive one layer's stages with scale 1 and 1/divisor, no new forward pass.

    head=None takes all heads. Later layers are NOT recomputed: they still saw the model's own weights.
    """
    heads = tuple(range(trace.n_head)) if head is None else (int(head),)
    pick = lambda st: Stages(*(np.asarray(s)[list(heads)] for s in st))  # noqa: E731
    raw = pick(trace.recompute(layer, scale=1.0))
    divided = pick(trace.recompute(layer, scale=1.0 / float(divisor)))
    bins = bins or int(np.clip(2 * math.sqrt(raw.scores.size), 20, 80))  # one head of a short sentence is ~200 cells
    return ScalingComparison(
        divisor=float(divisor),
        model_divisor=model_divisor(trace, layer),
        heads=heads,
        raw=raw,
        divided=divided,
        hist_scores=histogram(raw.scores, bins),
        hist_scaled=histogram(divided.scaled, bins),
    )


@lru_cache(maxsize=4)
def law_rows(
    dims: tuple[int, ...] = (2, 4, 8, 16, 32, 64, 128, 256, 512, 1024), n_keys: int = 64
) -> tuple[LawRow, ...]:
    """The random-vector experiment (seeds 000/003), cached: it is the same for every sentence."""
    return tuple(sqrt_d_law(dims=dims, n_queries=1000, n_keys=n_keys, seed=0))


# --- masks (Masks page) ----------------------------------------------------------------------------------


def mask_options(*, is_module: bool, pad_to: int, pad_mask: bool, causal: bool, hide, layers, fill: str) -> dict:
    """The trace options for a mask experiment; our single-layer module has no padding and no layer choice."""
    opts = dict(causal=bool(causal), hide=tuple(sorted(int(i) for i in hide)), fill=FILLS[fill])
    if not is_module:
        opts.update(pad_to=int(pad_to) if pad_to else None, pad_mask=bool(pad_mask), layers=layers)
    return opts


def unmasked_options(opts: dict) -> dict:
    """The same experiment with every mask under study switched off: same tokens, same layers, nothing hidden."""
    out = dict(opts, causal=False, hide=(), fill=None)
    if "pad_mask" in out:
        out["pad_mask"] = False
    return out


def reach_note(layers: tuple[int, ...] | None, layer: int, n_layer: int, is_module: bool = False) -> str:
    """Say which layers a forward-pass mask experiment changed, so nobody mistakes it for a one-layer what-if."""
    if is_module:
        return "**Forward-pass experiment.** Our single-layer module ran again with the mask."
    if layers is None:
        return "**Forward-pass experiment.** The model ran again with the mask inside every layer."
    later = (
        f", and layers {layer + 1}..{n_layer - 1} changed too because their input changed"
        if layer < n_layer - 1
        else ""
    )
    return f"**Forward-pass experiment.** The model ran again with the mask inside layer {layer} only{later}."


def forbidden_cells(n_tokens: int, n_real: int, causal: bool = False, hide=()) -> np.ndarray:
    """[query, key] True where a query should see nothing: padding keys, future keys (causal), hidden keys."""
    keys = np.arange(n_tokens)
    out = np.broadcast_to(keys >= n_real, (n_tokens, n_tokens)).copy()
    if causal:
        out |= keys[None, :] > keys[:, None]
    hide = [int(i) for i in hide if 0 <= int(i) < n_tokens]
    out[:, hide] = True
    return out


def leaked(weights: np.ndarray, forbidden: np.ndarray, n_real: int) -> np.ndarray:
    """[layer] attention mass on forbidden keys, averaged over heads and real (non-padding) queries.

    0 means the mask held; 0.3 means 30% of an average query's attention went where it should not.
    Padding queries are left out: their outputs are thrown away anyway.
    """
    w = np.asarray(weights, dtype=np.float64)[..., :n_real, :]  # [L, H, q_real, K]
    mass = (w * forbidden[None, None, :n_real]).sum(axis=-1)  # [L, H, q_real]
    return mass.mean(axis=(1, 2))


def layer_change(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """[layer] largest |a - b| over heads, queries and keys: which layers a forward-pass experiment reached."""
    return np.abs(np.asarray(a, np.float64) - np.asarray(b, np.float64)).max(axis=(1, 2, 3))


@dataclass(frozen=True)
class FillRow:
    """What softmax gives with one fill value on a row with every key masked and on a row with some keys masked."""

    fill: str
    every_masked: np.ndarray  # [key]
    some_masked: np.ndarray  # [key]


def fill_demo(scaled_row: np.ndarray, visible: np.ndarray, fills=("min", "-10000", "-1e9", "-inf")) -> list[FillRow]:
    """Run the package's own stage math on one real row of scaled values, for each fill.

    Every key masked: a finite fill makes every entry equal, so softmax is uniform (1 / n_keys);
    -inf makes every entry -inf and attnviz's softmax returns zeros (torch's would return NaN).
    Some keys masked (`visible` False somewhere): every fill gives the same weights, since
    exp(fill - max) underflows to exactly 0 in float32 for all of them.
    """
    row = torch.from_numpy(np.array(scaled_row, np.float32))
    masks = torch.stack([torch.zeros_like(row, dtype=torch.bool), torch.from_numpy(np.array(visible, bool))])
    out = []
    for name in fills:
        w = stages_from_scores(row.expand(2, -1), 1.0, masks, FILLS[name]).weights.numpy()  # [2, key]
        out.append(FillRow(name, w[0], w[1]))
    return out


def demo_row(mask: np.ndarray, n_real: int) -> tuple[int, np.ndarray]:
    """(query, visible keys) for the fill demo: the experiment's own partially masked row that keeps the most keys
    visible (the most interesting softmax); without one, query 0 with only the first half of the keys visible."""
    mask = np.asarray(mask, bool)[:n_real]
    visible = mask.sum(axis=-1)
    partial = np.flatnonzero((visible > 0) & (visible < mask.shape[-1]))
    if partial.size:
        q = int(partial[np.argmax(visible[partial])])
        return q, mask[q]
    return 0, np.arange(mask.shape[-1]) < max(1, (mask.shape[-1] + 1) // 2)


@dataclass(frozen=True)
class MaskReport:
    """Everything the Masks page shows for one layer and head: with the mask (E) vs without it (W)."""

    layer: int
    head: int
    n_real: int
    forbidden: np.ndarray  # [query, key]
    leak_with: np.ndarray  # [layer]
    leak_without: np.ndarray  # [layer]
    change: np.ndarray  # [layer] max |weights with - weights without|
    dead_rows: tuple[int, ...]  # real queries with every key masked in this layer
    fills: list[FillRow]
    demo_query: int


def mask_report(
    with_mask: AttentionTrace, without: AttentionTrace, layer: int, head: int, n_real: int, causal: bool, hide
) -> MaskReport:
    """Compare the experiment's trace with the same tokens traced with no mask under study."""
    T = with_mask.n_tokens
    forbidden = forbidden_cells(T, n_real, causal, hide)
    mask = with_mask.mask[layer]
    dead = tuple(int(q) for q in range(n_real) if not mask[q].any())
    q, visible = demo_row(mask, n_real)
    return MaskReport(
        layer=layer,
        head=head,
        n_real=n_real,
        forbidden=forbidden,
        leak_with=leaked(with_mask.weights, forbidden, n_real),
        leak_without=leaked(without.weights, forbidden, n_real),
        change=layer_change(with_mask.weights, without.weights),
        dead_rows=dead,
        fills=fill_demo(with_mask.scaled[layer, head, q], visible),
        demo_query=q,
    )
