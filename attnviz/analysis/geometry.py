"""The joint query-key space of one head (AttentionViz, Yeh et al. 2023): every token's query and key vector, as the
model used them, put in one picture where distance stands in for attention.

Raw queries and keys of a head often sit in two separate clouds, so a key's distance from a query says little about
the weight between them. Two changes make them comparable without changing any weight (`normalise`): queries and
keys are rescaled by a and 1/a (every q.k unchanged) and the keys translated so their centroid meets the queries'
(each query's logits all shift by one constant, q.shift, which the softmax ignores), with a chosen so that the mean
norms then match. How far distance can then be trusted is measured, not assumed: the correlation between the scaled
score q.k x scale and -distance over the (query, key) pairs the mask allows, compared within each query's row (what
a softmax compares), before and after (`correlation`).

Everything here takes plain arrays of points, so a sample drawn from many texts goes through the same functions as
one trace's head (`points_geometry`); `head_geometry` reads one head of a trace. PCA is the default projection
(numpy's SVD, deterministic signs); UMAP (umap-learn) and t-SNE (scikit-learn) are optional.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import checks
from ..errors import ArgumentError, AttnvizError, InputError, check_index
from ..trace import AttentionTrace

METHODS = {"pca": "PCA", "umap": "UMAP", "tsne": "t-SNE"}
#: The most points (queries and keys together) each method projects; above it a seeded sample is drawn and said.
#: PCA is linear in the points; UMAP and t-SNE build neighbour graphs and take minutes past a few thousand here.
MAX_POINTS = {"pca": 20_000, "umap": 5_000, "tsne": 5_000}
#: The most (query, key) pairs the correlation is computed over; above it, a seeded sample of query rows.
MAX_PAIRS = 1_000_000
INSTALL = {"umap": "pip install umap-learn==0.5.12", "tsne": "pip install scikit-learn==1.9.1"}


@dataclass(frozen=True)
class Normalised:
    """Queries and keys made comparable: q * a and k / a + shift, with the keys' centroid on the queries' and equal
    mean norms; every q.k of a row changes by the same amount (q.shift * a), so no softmax row changes."""

    q: np.ndarray
    k: np.ndarray
    a: float  # the rescaling: queries times a, keys divided by a
    shift: np.ndarray  # added to every rescaled key: a * mean q - mean k / a


@dataclass(frozen=True)
class Geometry:
    """One head's queries and keys in 2-D. Points are the sampled queries, then the sampled keys.

    `xy` [point, 2] float32; `is_key` [point] bool; `position` [point]: the token each point belongs to (a query's
    index among the queries, a key's among the keys); `n_queries`, `n_keys`: how many there were before sampling;
    `before`, `after`: Pearson correlation of q.k x scale with -distance over the allowed pairs, raw and normalised;
    `explained`: PCA's share of variance on each axis (None for UMAP, t-SNE); `note`: sampling said in words."""

    xy: np.ndarray
    is_key: np.ndarray
    position: np.ndarray
    n_queries: int
    n_keys: int
    before: float
    after: float
    a: float
    method: str
    explained: tuple[float, float] | None
    note: str

    @property
    def sampled(self) -> bool:
        return len(self.xy) < self.n_queries + self.n_keys


def _rescaling(q: np.ndarray, k: np.ndarray) -> float:
    """a with mean |a q| = mean |k / a + shift|, the shift putting the keys' centroid on the queries'.

    Divided by a, with t = 1 / a^2: mean |q| = mean |t (k - mean k) + mean q|. The right side is convex in t, equals
    |mean q| <= mean |q| at t = 0 and grows without bound, so one t > 0 solves it (bisection). Identical queries or
    identical keys leave nothing to match: a = 1."""
    centred, mean_q = k - k.mean(axis=0), q.mean(axis=0)
    target = np.linalg.norm(q, axis=1).mean()
    gap = lambda t: np.linalg.norm(t * centred + mean_q, axis=1).mean() - target  # noqa: E731
    if not np.abs(centred).any() or gap(0.0) >= -1e-12 * max(target, 1e-30):
        return 1.0
    hi = 1.0
    while gap(hi) < 0:
        hi *= 2.0
    lo = 0.0
    for _ in range(80):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if gap(mid) < 0 else (lo, mid)
    return float(1 / np.sqrt((lo + hi) / 2))


def normalise(q, k) -> Normalised:
    """Queries and keys of one head made comparable (see Normalised); float64."""
    q, k = np.asarray(q, np.float64), np.asarray(k, np.float64)
    a = _rescaling(q, k)
    shift = a * q.mean(axis=0) - k.mean(axis=0) / a
    return Normalised(q * a, k / a + shift, a, shift)


def _rows(n_q: int, n_k: int, most: int, rng: np.random.Generator) -> np.ndarray:
    """The query rows the correlation reads: all of them, or a seeded sample whose pairs number at most `most`."""
    return sample(n_q, max(1, most // max(n_k, 1)), int(rng.integers(2**31))) if n_q * n_k > most else np.arange(n_q)


def correlation(q, k, mask=None, scale: float = 1.0, most: int = MAX_PAIRS, seed: int = 0) -> float:
    """Pearson correlation of q.k x scale with -|q - k| over the pairs `mask` allows (all without one), each taken
    within its query's row: both are centred on the row's mean over its allowed keys, since a softmax ignores what a
    row's scores share (and the normalisation adds exactly such a constant). NaN when nothing varies. Above `most`
    pairs, a seeded sample of whole rows."""
    q, k = np.asarray(q, np.float64), np.asarray(k, np.float64)
    mask = np.ones((len(q), len(k)), bool) if mask is None else np.asarray(mask, bool)
    rows = _rows(len(q), len(k), most, np.random.default_rng(seed))
    i, j = np.nonzero(mask[rows])
    i = rows[i]
    if len(i) < 2:
        return float("nan")
    score = np.einsum("pd,pd->p", q[i], k[j]) * scale
    distance = -np.linalg.norm(q[i] - k[j], axis=1)
    count = np.bincount(i, minlength=len(q))
    for v in (score, distance):  # centred within each row, in place
        v -= (np.bincount(i, v, minlength=len(q)) / np.maximum(count, 1))[i]
    den = np.sqrt((score @ score) * (distance @ distance))
    return float(score @ distance / den) if den > 0 else float("nan")


def pca(points, n: int = 2) -> tuple[np.ndarray, np.ndarray]:
    """(projection [point, n], share of variance of each axis) of the centred points. The axes come from numpy's SVD
    of the [d, d] scatter matrix (its singular vectors are the points' own right singular vectors): 100,000 points
    of head dim 64 in tens of milliseconds, where the SVD of the points themselves took seconds. Signs are fixed so
    each axis's largest loading is positive: the same points always give the same picture."""
    x = np.asarray(points, np.float64)
    x = x - x.mean(axis=0)
    _, s, vt = np.linalg.svd(x.T @ x, hermitian=True)  # s: the squared singular values of x, largest first
    vt = vt[:n]
    vt = vt * np.sign(vt[np.arange(len(vt)), np.abs(vt).argmax(axis=1)])[:, None]
    total = float(s.sum())
    share = s[:n] / total if total > 0 else np.zeros(len(vt))
    out = x @ vt.T
    if out.shape[1] < n:  # one-dimensional vectors: pad with zeros
        out = np.pad(out, ((0, 0), (0, n - out.shape[1])))
        share = np.pad(share, (0, n - len(share)))
    return out, share


def _library(method: str):
    """The optional projection library, or an AttnvizError that says how to install it."""
    try:
        if method == "umap":
            import umap

            return umap
        from sklearn import manifold

        return manifold
    except ImportError:
        raise AttnvizError(
            f"{METHODS[method]} needs a library that is not installed here: `{INSTALL[method]}`, then reload. "
            "PCA needs nothing more."
        ) from None


def project(points, method: str = "pca", seed: int = 0) -> tuple[np.ndarray, tuple[float, float] | None]:
    """(points in 2-D [point, 2] float32, PCA's explained shares or None)."""
    if method not in METHODS:
        raise InputError(f"unknown projection {method!r}; choose one of {', '.join(METHODS)}.")
    x = np.asarray(points, np.float64)
    if method == "pca" or len(x) < 4:  # UMAP and t-SNE need a few neighbours; a handful of points is PCA's
        xy, share = pca(x)
        return xy.astype(np.float32), (float(share[0]), float(share[1]))
    lib = _library(method)
    if method == "umap":
        reducer = lib.UMAP(n_components=2, n_neighbors=min(15, len(x) - 1), random_state=seed, init="random")
    else:
        reducer = lib.TSNE(n_components=2, perplexity=min(30.0, (len(x) - 1) / 3), init="pca", random_state=seed)
    from threadpoolctl import threadpool_limits  # comes with scikit-learn, which both methods need

    # One thread: OpenMP's waiting threads on a shared server (every session runs its script beside the others) made
    # a 12-point t-SNE take 12 s here instead of 0.4 s.
    with threadpool_limits(1):
        return np.asarray(reducer.fit_transform(x), np.float32), None


def sample(n: int, most: int, seed: int) -> np.ndarray:
    """Sorted indices of a seeded sample of `most` of range(n), or all of them."""
    if n <= most:
        return np.arange(n)
    return np.sort(np.random.default_rng(seed).choice(n, most, replace=False))


@checks.public(name="attnviz.analysis.geometry.points_geometry")
def points_geometry(
    q,
    k,
    mask=None,
    scale: float = 1.0,
    method: str = "pca",
    normalised: bool = True,
    most: int | None = None,
    seed: int = 0,
) -> Geometry:
    """Queries [n_q, d] and keys [n_k, d] of one head (one text, or a sample of many) projected together.

    `mask` [n_q, n_k] (True = may attend) picks the pairs the correlations are computed over; `normalised` projects
    the normalised vectors (the default) or the raw ones. Above `most` points (MAX_POINTS[method] by default),
    queries and keys are sampled in proportion, seeded, and the note says so."""
    own = lambda a: np.array(a, np.float32) if isinstance(a, np.ndarray) and a.dtype.kind in "fiub" else a  # noqa: E731
    q, k = (checks.array(n, own(a), (2,)).numpy().astype(np.float32, copy=False) for n, a in (("q", q), ("k", k)))
    mask = None if mask is None else checks.array("mask", np.array(mask), (2,), finite=False).numpy()  # a copy
    checks.number("scale", scale, nonzero=True, high=1e4)
    check_options(method, normalised, most, seed)
    if q.shape[1] != k.shape[1] or not len(q) or not len(k):
        raise InputError(f"queries and keys must be [n, d] arrays of the same d; got {q.shape} and {k.shape}.")
    if mask is not None and mask.shape != (len(q), len(k)):
        raise ArgumentError("mask", f"mask must be [queries, keys], {(len(q), len(k))}; got {mask.shape}.")
    most = MAX_POINTS[method] if most is None else int(most)
    norm = normalise(q, k)
    before, after = correlation(q, k, mask, scale, seed=seed), correlation(norm.q, norm.k, mask, scale, seed=seed)
    n_q, n_k = len(q), len(k)
    share = min(1.0, most / (n_q + n_k))
    qi, ki = sample(n_q, max(1, int(n_q * share)), seed), sample(n_k, max(1, int(n_k * share)), seed + 1)
    pq, pk = (norm.q, norm.k) if normalised else (q, k)
    xy, explained = project(np.concatenate([pq[qi], pk[ki]]), method, seed)
    shown = len(qi) + len(ki)
    note = (
        ""
        if shown == n_q + n_k
        else (
            f"{n_q + n_k:,} points ({n_q:,} queries, {n_k:,} keys) are more than {METHODS[method]} draws here "
            f"({most:,}): a seeded sample of {len(qi):,} queries and {len(ki):,} keys is shown."
        )
    )
    is_key = np.r_[np.zeros(len(qi), bool), np.ones(len(ki), bool)]
    return Geometry(xy, is_key, np.r_[qi, ki], n_q, n_k, before, after, norm.a, method, explained, note)


@checks.public(name="attnviz.analysis.geometry.head_geometry")
def head_geometry(
    trace: AttentionTrace,
    layer: int,
    head: int,
    method: str = "pca",
    normalised: bool = True,
    most: int | None = None,
    seed: int = 0,
) -> Geometry:
    """One head of a trace: its q and k as the model used them (after rotary embeddings; a grouped-query head with
    its group's shared keys), the layer's mask and scale."""
    layer = check_index("layer", layer, trace.n_layer)
    check_options(method, normalised, most, seed)
    q, k = trace.vectors(layer, head)  # InputError with the reason where the trace keeps no vectors
    scale = trace.facts(layer).scale
    return points_geometry(q, k, trace.layer_mask(layer), scale, method, normalised, most, seed)


def check_options(method, normalised, most, seed) -> None:
    """The projection's options, checked before any vector is read (ArgumentError naming the option)."""
    if not isinstance(method, str):
        checks.choice("method", method, tuple(METHODS))  # a wrong type, said as one
    if method not in METHODS:
        raise ArgumentError("method", f"unknown projection {checks.shown(method)}; choose one of {', '.join(METHODS)}.")
    checks.flag("normalised", normalised)
    checks.whole("most", most, low=1, none=True)
    checks.whole("seed", seed, low=0, high=2**62)


#: Points per panel in the small multiples of every head of a layer.
PANEL_POINTS = 1_000


@checks.public(name="attnviz.analysis.geometry.layer_geometry")
def layer_geometry(trace: AttentionTrace, layer: int, most: int = PANEL_POINTS, seed: int = 0) -> list[Geometry]:
    """Every head of a layer, normalised and projected with PCA, at most `most` points each."""
    layer = check_index("layer", layer, trace.n_layer)
    check_options("pca", True, most, seed)
    return [head_geometry(trace, layer, h, "pca", True, most, seed) for h in range(trace.n_head)]


def layer_notes(trace: AttentionTrace, layer: int) -> list[str]:
    """What the distances leave out for this layer: terms added to q.k that no point carries."""
    facts = trace.facts(layer)
    out = []
    if facts.bias is not None:
        out.append("This layer adds a position bias to q.k: the weights depend on it too, and no point shows it.")
    if facts.softcap is not None:
        out.append(f"This layer caps its logits ({facts.softcap:g}·tanh(x/{facts.softcap:g})) before the softmax.")
    if facts.sinks is not None:
        out.append("This layer's softmax has learned sinks beside the keys: they take weight no key point shows.")
    return out


#: How points can be coloured: by position, by token, by sentence of a pair, by role (prompt or output).
COLOURS = {"position": "position", "token": "token", "sentence": "sentence", "role": "role (prompt, output)"}
SENTENCES = {0: "first text", 1: "second text", None: "special token"}


def sentence_groups(trace: AttentionTrace) -> tuple[list[str], list[str]]:
    """The sentence of each query and each key token: first text, second text of a pair, or a special token."""
    name = lambda ids, n: [SENTENCES.get(i, f"text {i}") for i in (ids or (0,) * n)]  # noqa: E731
    return name(trace.sequence_ids, trace.n_tokens), name(trace.key_sequence_ids, trace.n_keys)


def role_groups(trace: AttentionTrace) -> tuple[list[str], list[str]]:
    """Prompt or output for each query and key token of a generation; every token "input" without one."""
    gen = trace.generation
    queries = [
        "input" if gen is None else "prompt" if i < gen.prompt_length else "output" for i in range(trace.n_tokens)
    ]
    return queries, queries if trace.n_keys == trace.n_tokens else ["input"] * trace.n_keys
