"""The attention math, stage by stage, and our from-scratch multi-head attention module.

Every stage keeps its own name, in code, UI and tests:

    scores  = q @ k^T                      raw dot products, before any scaling or mask
    scaled  = scores * scale               the scale the model really used (1/sqrt(d_head) by default)
    masked  = scaled where mask else fill  disallowed cells replaced by `fill`
    weights = softmax(masked)              rows sum to 1 (or to 0 on a row with every key masked by -inf)

Axis order is always [batch, head, query, key]; a mask is boolean with True = "may attend".

Why scale at all: with unit-variance i.i.d. q and k entries, Var(q.k) = d, so unscaled softmax inputs grow like
sqrt(d) and the softmax saturates; 1/sqrt(d) brings the variance back to 1 (see `attnviz.analysis.law`).

The score need not be a dot product (`ScoreFunction`, the general attention model): `dot` q.k, `scaled_dot`
q.k with the 1/sqrt(d) scale (the default), `general` q^T W k (Luong et al. 2015) and `additive`
v^T tanh(W_q q + W_k k) (Bahdanau et al. 2015); its output is the `scores` stage. Only scaled_dot scales by default:
tanh bounds the additive score (|score| <= sum |v| at any width), while dot and general grow like sqrt(d).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch
from torch import nn

from . import checks
from .errors import ArgumentError, AttnvizError

#: What masked cells become before the softmax, as Hugging Face models do it: the float32 minimum
#: (about -3.4e38). Other common choices are -10000, -1e9 and -inf; see `softmax` for fully masked rows.
DEFAULT_FILL = float(torch.finfo(torch.float32).min)


MAX_SCALE = 1e4  # scores are O(10-100); a larger multiplier only overflows float32 towards inf


def default_scale(d_head: int) -> float:
    """1/sqrt(d_head): brings Var(q.k) back to 1 when q and k have unit-variance entries."""
    return 1.0 / math.sqrt(checks.whole("d_head", d_head, low=1, high=checks.MAX_WIDTH))


def check_scale(scale: float) -> float:
    """A usable scale: finite, non-zero and small enough that scores * scale stays finite in float32."""
    return checks.number("scale", scale, nonzero=True, high=MAX_SCALE)


class Stages(NamedTuple):
    """The four named stages of one attention computation, each [..., query, key]."""

    scores: torch.Tensor
    scaled: torch.Tensor
    masked: torch.Tensor
    weights: torch.Tensor


def softmax(x: torch.Tensor) -> torch.Tensor:
    """Softmax over the last axis that never returns NaN.

    A row whose every entry is -inf (every key masked with fill=-inf) gets all-zero weights: the query attends to
    nothing, so its output is zero (torch.softmax would give NaN). A finite fill (-10000, -1e9, dtype min) needs no
    special case: a fully masked row's softmax is uniform over all keys, which is what the model computes."""
    x = checks.array("x", x, range(1, 9), finite=False)
    weights = torch.softmax(x, dim=-1)  # the very kernel eager attention uses, so weights match it bit for bit
    # An all -inf row comes out of torch.softmax as NaN in every column, so looking at the first column (T values
    # per head, not T*T) finds every candidate; only then pay for the exact check (x.amax: a full pass) over the rows.
    if not bool(weights[..., :1].isnan().any()):
        return weights
    dead = torch.isneginf(x.amax(dim=-1, keepdim=True))
    return weights.masked_fill(dead, 0.0)


def stages_from_scores(scores: torch.Tensor, scale: float, mask: torch.Tensor | None = None, fill: float = DEFAULT_FILL,
                       bias=None, softcap: float | None = None, sinks: torch.Tensor | None = None) -> Stages:  # fmt: skip
    """scores -> scaled -> masked -> weights. The one place where the stages are defined.

    `mask` is boolean (True = may attend) and broadcasts against `scores`. Three things some models add, each
    computed as the model computes it:
    - `bias`: an additive position bias (T5's relative positions, ALiBi), part of the scaled stage;
    - `softcap`: logit softcapping (Gemma 2), scaled = softcap * tanh(scaled / softcap), before the mask;
    - `sinks`: one learned logit per head ([head], gpt-oss) or one per query ([..., head, query], computed from each
      token as Inkling 2 does) that joins the row's softmax as an extra key and is then
      dropped (gpt-oss), so a row's weights sum to less than 1: the rest went to the sink.
    """
    scores = checks.array("scores", scores, range(1, 9), finite=False)
    scale, fill = check_scale(scale), checks.number("fill", fill, minus_inf=True)
    mask = None if mask is None else as_bool_mask(checks.fits("mask", mask, scores.shape))
    softcap = checks.number("softcap", softcap, none=True, low=0, nonzero=True, high=MAX_SCALE)
    scaled, masked = masked_from_scores(scores, scale, mask, fill, bias, softcap)
    return Stages(scores, scaled, masked, _weights(masked, sinks))


def _weights(masked: torch.Tensor, sinks: torch.Tensor | None) -> torch.Tensor:
    """softmax(masked), with the sink logits (if any) as an extra key of every row that is then dropped."""
    if sinks is None:
        return softmax(masked)
    sink = sinks.reshape(-1, 1, 1) if sinks.dim() == 1 else sinks.unsqueeze(-1)  # per head / per query
    sink = sink.to(masked.dtype).expand(*masked.shape[:-1], 1)  # [..., head, query, 1]
    return softmax(torch.cat([masked, sink], dim=-1))[..., :-1]


def weights_from_scores(scores, scale: float, mask=None, fill: float = DEFAULT_FILL, bias=None, softcap=None,
                        sinks=None) -> torch.Tensor:  # fmt: skip
    """The weights of `stages_from_scores` alone, equal to its weights bit for bit: the same operations, done in place
    on `scores`, which the caller gives up (a tensor nobody else holds; no autograd). For reads that need only the
    weights (value norms): one [..., query, key] tensor is allocated besides the scores instead of three."""
    x = scores.mul_(scale)
    if bias is not None:
        x.add_(bias)
    if softcap is not None:
        x.div_(softcap).tanh_().mul_(softcap)
    if mask is not None and not bool(mask.all()):
        x.masked_fill_(~mask, fill)
    return _weights(x, sinks)


def masked_from_scores(scores, scale: float, mask=None, fill: float = DEFAULT_FILL, bias=None, softcap=None):
    """(scaled, masked): the stages before the softmax, as `stages_from_scores` defines them (it calls this), so the
    row normalisers of a trace (attnviz.row_norms) come from the very same masked scores."""
    scaled = scores * scale
    if bias is not None:
        scaled = scaled + bias
    if softcap is not None:
        scaled = torch.tanh(scaled / softcap) * softcap
    masked = scaled if mask is None or bool(mask.all()) else scaled.masked_fill(~mask, fill)
    return scaled, masked


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None = None,
              scale: float | None = None, fill: float = DEFAULT_FILL) -> tuple[torch.Tensor, Stages]:  # fmt: skip
    """Scaled dot-product attention that returns the output and every stage.

    q: [..., Tq, d], k: [..., Tk, d], v: [..., Tk, dv] -> output [..., Tq, dv]."""
    q, k, v = (checks.array(name, x, range(2, 9)) for name, x in (("q", q), ("k", k), ("v", v)))
    if q.shape[-1] != k.shape[-1] or k.shape[-2] != v.shape[-2]:
        raise ArgumentError("q", f"q [..., Tq, d], k [..., Tk, d] and v [..., Tk, dv] do not fit: {list(q.shape)}, "
                                 f"{list(k.shape)}, {list(v.shape)}.")  # fmt: skip
    scale = default_scale(q.shape[-1]) if scale is None else check_scale(scale)
    scores = q @ k.transpose(-2, -1)  # [..., Tq, Tk]
    stages = stages_from_scores(scores, scale, mask, fill)
    return stages.weights @ v, stages


# --- score functions ---------------------------------------------------------------------------

SCORE_FUNCTIONS = ("dot", "scaled_dot", "general", "additive")
ADDITIVE_CHUNK = 2**24  # float32 hidden units held at once by the additive score (64 MB); longer texts go in blocks


def dot_scores(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """q [..., Tq, d], k [..., Tk, d] -> q.k for every pair, [..., Tq, Tk]."""
    return q @ k.transpose(-2, -1)


def general_scores(q: torch.Tensor, k: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """q^T W k for every pair; w [..., d_q, d_k] (one per head when it has a head axis)."""
    return q @ w @ k.transpose(-2, -1)


def additive_scores(q, k, w_q: torch.Tensor, w_k: torch.Tensor, v: torch.Tensor, chunk: int = ADDITIVE_CHUNK):
    """v^T tanh(W_q q + W_k k) for every pair; w_q [..., h, d_q], w_k [..., h, d_k], v [..., h].

    The hidden layer is [..., Tq, Tk, h]: queries are taken in blocks so at most about `chunk` of it exists.
    """
    hq = q @ w_q.transpose(-2, -1)  # [..., Tq, h]
    hk = (k @ w_k.transpose(-2, -1)).unsqueeze(-3)  # [..., 1, Tk, h]
    v = v[..., None, None, :]  # [..., 1, 1, h]
    step = max(1, chunk // max(1, hk.numel()))
    blocks = [(torch.tanh(hq[..., i : i + step, None, :] + hk) * v).sum(-1) for i in range(0, hq.shape[-2], step)]
    return torch.cat(blocks, dim=-2) if blocks else hq.new_zeros((*hq.shape[:-1], k.shape[-2]))


class ScoreFunction(nn.Module):
    """How every head turns a query and a key into one score, with its own seeded parameters (per head).

    general: W [head, d_head, d_head]; additive: W_q, W_k [head, hidden, d_head] and v [head, hidden]; entries
    N(0, 1/fan_in), drawn from `seed` alone (the global RNG is neither read nor moved). dot and scaled_dot have
    no parameters; `default_scale` says which scale the stages apply when the caller gives none.
    """

    def __init__(self, kind: str = "scaled_dot", n_head: int = 1, d_head: int = 1, hidden=None, seed: int = 0):
        super().__init__()
        if not isinstance(kind, str) or kind not in SCORE_FUNCTIONS:
            raise ArgumentError("score", f"The score function must be one of {', '.join(SCORE_FUNCTIONS)}; "
                                                f"got {checks.shown(kind)} (score).")  # fmt: skip
        hidden = checks.whole("score_hidden", hidden, low=1, high=checks.MAX_WIDTH, none=True)
        self.kind, self.hidden = kind, hidden or d_head
        g = torch.Generator().manual_seed(checks.whole("score_seed", seed, low=0, high=2**63 - 1))
        normal = lambda *shape: nn.Parameter(torch.randn(*shape, generator=g) / math.sqrt(shape[-1]))  # noqa: E731
        if kind == "general":
            self.w = normal(n_head, d_head, d_head)
        elif kind == "additive":
            self.w_q, self.w_k = normal(n_head, self.hidden, d_head), normal(n_head, self.hidden, d_head)
            self.v = normal(n_head, self.hidden)

    def extra_repr(self) -> str:
        return f"kind={self.kind}" + (f", hidden={self.hidden}" if self.kind == "additive" else "")

    def default_scale(self, d_head: int) -> float:
        """1/sqrt(d_head) for scaled_dot; 1 for the others (dot is the unscaled one; see the module docstring)."""
        return default_scale(d_head) if self.kind == "scaled_dot" else 1.0

    def forward(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        """q [B, nh, Tq, hd], k [B, nh, Tk, hd] -> scores [B, nh, Tq, Tk] (before any scale or mask)."""
        if self.kind == "general":
            return general_scores(q, k, self.w)
        if self.kind == "additive":
            return additive_scores(q, k, self.w_q, self.w_k, self.v)
        return dot_scores(q, k)


# --- masks ---------------------------------------------------------------------------------------


def causal_mask(n_query: int, n_key: int | None = None, device=None) -> torch.Tensor:
    """[Tq, Tk] boolean: query i may attend keys 0..i (aligned to the end if Tk > Tq, as with a cache); bounded."""
    n_query = checks.whole("n_query", n_query, low=0, high=checks.MAX_TOKENS)
    n_key = n_query if n_key is None else checks.whole("n_key", n_key, low=0, high=checks.MAX_TOKENS)
    checks.cells("causal_mask", n_query, n_key)
    return causal_cells(n_query, n_key, device)


def causal_cells(n_query: int, n_key: int, device=None) -> torch.Tensor:
    """causal_mask without its checks, for sizes a forward pass already holds."""
    return torch.ones(n_query, n_key, dtype=torch.bool, device=device).tril(diagonal=n_key - n_query)


def valid_length_mask(valid_lens: torch.Tensor, n_query: int, n_key: int) -> torch.Tensor:
    """Padding mask from valid lengths: [batch] or [batch, Tq] -> [batch, 1, Tq, Tk].

    Key j is visible to a query when j < valid_len; a [batch, Tq] tensor gives one length per query.
    """
    valid_lens = checks.lengths("valid_lens", valid_lens)
    n_query = checks.whole("n_query", n_query, low=0, high=checks.MAX_TOKENS)
    n_key = checks.whole("n_key", n_key, low=0, high=checks.MAX_TOKENS)
    checks.cells("valid_length_mask", valid_lens.shape[0], n_query, n_key)
    if valid_lens.dim() == 1:
        valid_lens = valid_lens[:, None].expand(-1, n_query)  # [B, Tq]
    if valid_lens.shape[-1] != n_query:
        raise ArgumentError(
            "valid_lens", f"valid_lens has {valid_lens.shape[-1]} per row, not {n_query} (one per query)."
        )
    keys = torch.arange(n_key, device=valid_lens.device)
    return (keys[None, None, :] < valid_lens[:, :, None])[:, None]  # [B, 1, Tq, Tk]


def as_bool_mask(mask: torch.Tensor) -> torch.Tensor:
    """Accept boolean masks (True = may attend) and 0/1 masks (0 = blocked)."""
    mask = torch.as_tensor(mask)
    return mask if mask.dtype == torch.bool else mask != 0


# --- our own multi-head attention ---------------------------------------------------------------


class MultiHeadAttention(nn.Module):
    """Multi-head attention written from scratch, keeping every stage of every head.

    Separate q, k, v and output projections; heads are split and merged with explicit reshapes.
    `forward` returns `(output, stages)`, stages shaped [batch, head, query, key]. Queries may come from
    one sequence and keys and values from another (cross-attention: Tq queries over Tk keys). `score` picks the
    score function (SCORE_FUNCTIONS; see `ScoreFunction`), its parameters drawn from `score_seed`.
    """

    @checks.public(name="MultiHeadAttention")
    def __init__(
        self, d_model: int, n_head: int, bias: bool = True, causal: bool = False, score: str = "scaled_dot",
        score_hidden: int | None = None, score_seed: int = 0,
    ):  # fmt: skip
        super().__init__()
        d_model = checks.whole("d_model", d_model, low=1, high=checks.MAX_WIDTH)
        n_head, bias = checks.whole("n_head", n_head, low=1, high=checks.MAX_HEADS), checks.flag("bias", bias)
        if d_model % n_head != 0:
            raise AttnvizError(
                f"d_model={d_model} is not divisible by n_head={n_head}: every head needs d_model / n_head "
                f"dimensions. Try n_head in {[h for h in range(1, min(d_model, 64) + 1) if d_model % h == 0]}."
            )
        self.d_model, self.n_head, self.d_head = d_model, n_head, d_model // n_head
        self.causal = checks.flag("causal", causal)  # used when forward(causal=None); a copied decoder layer sets it
        self.w_q, self.w_k, self.w_v, self.w_o = (nn.Linear(d_model, d_model, bias=bias) for _ in range(4))
        self.use_score(score, score_hidden, score_seed)

    def use_score(self, score: str, hidden: int | None = None, seed: int = 0) -> MultiHeadAttention:
        """Switch the score function (its parameters drawn from `seed`); the projections are kept."""
        self.score_fn = ScoreFunction(score, self.n_head, self.d_head, hidden, seed)
        return self

    @property
    def score(self) -> str:
        return self.score_fn.kind

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, n_head={self.n_head}, d_head={self.d_head}, causal={self.causal}"

    def split_heads(self, x: torch.Tensor) -> torch.Tensor:
        batch, time, _ = x.shape
        x = x.view(batch, time, self.n_head, self.d_head)  # (B, T, nh, hd)
        return x.transpose(1, 2)  # (B, nh, T, hd)

    def merge_heads(self, x: torch.Tensor) -> torch.Tensor:
        batch, _, time, _ = x.shape
        x = x.transpose(1, 2)  # (B, T, nh, hd)
        return x.reshape(batch, time, self.d_model)  # (B, T, d_model)

    def project(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor):
        """[B, T, d_model] inputs -> per-head queries, keys and values [B, nh, T, hd]."""
        qh = self.split_heads(self.w_q(q))  # (B, nh, Tq, hd)
        kh = self.split_heads(self.w_k(k))  # (B, nh, Tk, hd)
        vh = self.split_heads(self.w_v(v))  # (B, nh, Tk, hd)
        return qh, kh, vh

    def build_mask(
        self, batch: int, n_query: int, n_key: int, mask=None, valid_lens=None, causal: bool | None = None, device=None
    ) -> torch.Tensor | None:
        """Combine a boolean mask, valid lengths and causality into one [B or 1, nh or 1, Tq, Tk] mask."""
        causal = self.causal if causal is None else checks.flag("causal", causal)
        combined = None
        if mask is not None:
            combined = as_bool_mask(checks.array("mask", mask, (2, 3, 4), finite=False)).to(device)
            if combined.dim() == 3:
                combined = combined.unsqueeze(1)  # [B, Tq, Tk] -> [B, 1, Tq, Tk]: one mask per example, all heads
            while combined.dim() < 4:
                combined = combined.unsqueeze(0)  # [Tq, Tk] -> [1, 1, Tq, Tk]
        if valid_lens is not None:
            vl = valid_length_mask(checks.lengths("valid_lens", valid_lens, batch).to(device), n_query, n_key)
            combined = vl if combined is None else combined & vl
        if causal:
            cm = causal_cells(n_query, n_key, device=device)[None, None]
            combined = cm if combined is None else combined & cm
        return combined

    @checks.public(name="MultiHeadAttention.forward")
    def forward(
        self,
        q: torch.Tensor,
        k: torch.Tensor | None = None,
        v: torch.Tensor | None = None,
        mask: torch.Tensor | None = None,
        valid_lens: torch.Tensor | None = None,
        causal: bool | None = None,
        scale: float | None = None,
        fill: float = DEFAULT_FILL,
    ) -> tuple[torch.Tensor, Stages]:
        """q: [B, Tq, d_model] (or [Tq, d_model]); k, v: [B, Tk, d_model], default q (self-attention).

        mask: boolean, True = may attend: [Tq, Tk], [B, Tq, Tk] (per example) or [B or 1, nh or 1, Tq, Tk];
        0/1 masks are accepted.
        valid_lens: [B] or [B, Tq] key lengths (padding). causal: query i sees keys <= i.
        scale: default 1/sqrt(d_head) for the scaled_dot score, 1 for the others. fill: what masked cells become."""
        q = checks.array("q", q, (2, 3))
        k = q if k is None else checks.array("k", k, (2, 3))
        v = k if v is None else checks.array("v", v, (2, 3))
        q, k, v = (x.to(self.w_q.weight.dtype) for x in (q, k, v))
        unbatched = q.dim() == 2
        if unbatched:
            q, k, v = q[None], k[None], v[None]
        for name, x in (("q", q), ("k", k), ("v", v)):
            if x.dim() != 3 or x.shape[-1] != self.d_model:
                raise AttnvizError(f"{name} must be [batch, time, {self.d_model}], got {list(x.shape)}.")
        if k.shape[1] != v.shape[1]:
            raise AttnvizError(f"k and v must have the same length, got {k.shape[1]} and {v.shape[1]}.")
        batch, n_query, n_key = q.shape[0], q.shape[1], k.shape[1]

        qh, kh, vh = self.project(q, k, v)
        full_mask = self.build_mask(batch, n_query, n_key, mask, valid_lens, causal, device=q.device)
        scale = self.score_fn.default_scale(self.d_head) if scale is None else check_scale(scale)
        fill = checks.number("fill", fill, minus_inf=True)
        stages = stages_from_scores(self.score_fn(qh, kh), scale, full_mask, fill)  # each (B, nh, Tq, Tk)
        context = stages.weights @ vh  # (B, nh, Tq, hd)
        output = self.w_o(self.merge_heads(context))  # (B, Tq, d_model)
        if unbatched:
            output = output[0]
            stages = Stages(*(s[0] for s in stages))
        return output, stages

    @classmethod
    def from_torch(cls, m: nn.MultiheadAttention) -> MultiHeadAttention:
        """Copy a torch.nn.MultiheadAttention, unpacking its in_proj_weight [3*d, d]: rows [0, d) project queries,
        [d, 2d) keys, [2d, 3d) values."""
        if m.kdim != m.embed_dim or m.vdim != m.embed_dim:
            raise AttnvizError("from_torch needs q, k and v of the same size (kdim == vdim == embed_dim).")
        if m.bias_k is not None or m.add_zero_attn:
            raise AttnvizError("from_torch does not support add_bias_kv or add_zero_attn.")
        d, bias = m.embed_dim, m.in_proj_bias is not None
        ours = cls(d, m.num_heads, bias=bias)
        w_q, w_k, w_v = m.in_proj_weight.detach().split(d, dim=0)  # each [d, d]
        with torch.no_grad():
            for lin, w in ((ours.w_q, w_q), (ours.w_k, w_k), (ours.w_v, w_v)):
                lin.weight.copy_(w)
            ours.w_o.weight.copy_(m.out_proj.weight)
            if bias:
                b_q, b_k, b_v = m.in_proj_bias.detach().split(d)
                for lin, b in ((ours.w_q, b_q), (ours.w_k, b_k), (ours.w_v, b_v)):
                    lin.bias.copy_(b)
                ours.w_o.bias.copy_(m.out_proj.bias)
        return ours


def seeded_module(
    d_model: int, n_head: int, bias: bool = True, seed: int = 0, score: str = "scaled_dot"
) -> MultiHeadAttention:
    """A MultiHeadAttention whose random weights depend only on `seed` (same in every process).

    Uses its own torch.Generator so it neither reads nor disturbs the global RNG. The projections are drawn as
    before score functions existed (same values for a seed); the score function's parameters from `seed` too.
    """
    with torch.random.fork_rng(devices=[]):  # nn.Linear's own init draws from the global RNG: undo that
        m = MultiHeadAttention(d_model, n_head, bias=bias, score=score, score_seed=seed)
    g = torch.Generator().manual_seed(seed)  # checked by the module (score_seed)
    bound = 1.0 / math.sqrt(d_model)  # nn.Linear's default range, drawn from our generator
    with torch.no_grad():
        for p in (p for lin in (m.w_q, m.w_k, m.w_v, m.w_o) for p in lin.parameters()):
            p.copy_(torch.rand(p.shape, generator=g) * 2 * bound - bound)
    return m


def seeded_vectors(n: int, d: int, seed: int = 0) -> torch.Tensor:
    """[n, d] standard normal input vectors that depend only on `seed`."""
    n, d = checks.whole("n", n, low=0, high=checks.MAX_TOKENS), checks.whole("d", d, low=1, high=checks.MAX_WIDTH)
    checks.cells("seeded_vectors", n, d, most=checks.MAX_CELLS // 4)  # float32: 1 GiB at most
    return torch.randn(n, d, generator=torch.Generator().manual_seed(checks.whole("seed", seed, low=0, high=2**63 - 1)))


# The public functions check their call against their signature (unknown keywords, missing arguments) first.
_PUBLIC = (default_scale, softmax, stages_from_scores, attention, causal_mask, valid_length_mask, seeded_module,
           seeded_vectors)  # fmt: skip
for _f in _PUBLIC:
    globals()[_f.__name__] = checks.public(_f, name=f"attnviz.{_f.__name__}")
