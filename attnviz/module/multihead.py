"""Our own multi-head attention, written from scratch, keeping every stage of every head."""

from __future__ import annotations

import math

import torch
from torch import nn

from .. import checks
from ..attention import (
    DEFAULT_FILL,
    Stages,
    as_bool_mask,
    causal_cells,
    check_scale,
    masked_from_scores,
    masked_in_place,
    stages_from_scores,
    valid_length_mask,
    weights_from_masked,
)
from ..errors import AttnvizError
from ..trace import LayerRecord, Values, output_norms
from ..trace.row_norms import norms_of
from .scores import ScoreFunction


class MultiHeadAttention(nn.Module):
    """Multi-head attention written from scratch, keeping every stage of every head.

    Separate q, k, v and output projections; heads are split and merged with explicit reshapes.
    `forward` returns `(output, stages)`, stages shaped [batch, head, query, key]. Queries may come from
    one sequence and keys and values from another (cross-attention: Tq queries over Tk keys). `score` picks the
    score function (SCORE_FUNCTIONS; see `ScoreFunction`), its parameters drawn from `score_seed`.
    """

    @checks.public(name="MultiHeadAttention")
    def __init__(
        self,
        d_model: int,
        n_head: int,
        bias: bool = True,
        causal: bool = False,
        score: str = "scaled_dot",
        score_hidden: int | None = None,
        score_seed: int = 0,
    ):
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

    def batched(self, q, k=None, v=None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, bool]:
        """(q, k, v as [B, T, d_model] tensors in the module's dtype, whether q came unbatched); k defaults to q and v
        to k. Checked: arrays of numbers without NaN, of rank 2 or 3, d_model wide, k and v of one length."""
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
        return q, k, v, unbatched

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
        record: bool = False,
    ) -> tuple[torch.Tensor, Stages | LayerRecord]:
        """q: [B, Tq, d_model] (or [Tq, d_model]); k, v: [B, Tk, d_model], default q (self-attention).

        mask: boolean, True = may attend: [Tq, Tk], [B, Tq, Tk] (per example) or [B or 1, nh or 1, Tq, Tk];
        0/1 masks are accepted.
        valid_lens: [B] or [B, Tq] key lengths (padding). causal: query i sees keys <= i.
        scale: default 1/sqrt(d_head) for the scaled_dot score, 1 for the others. fill: what masked cells become.
        record: (output, the first example's LayerRecord, what this call made the stages from; `recorded_layer`)
        instead of (output, stages), so a trace of our module is what its forward computed."""
        q, k, v, unbatched = self.batched(q, k, v)
        n_query, n_key = q.shape[1], k.shape[1]

        qh, kh, vh = self.project(q, k, v)
        causal = self.causal if causal is None else checks.flag("causal", causal)
        mask = None if mask is None else checks.array("mask", mask, (2, 3, 4), finite=False)
        valid_lens = None if valid_lens is None else checks.lengths("valid_lens", valid_lens, q.shape[0])
        full_mask = combined_mask(n_query, n_key, mask, valid_lens, causal, device=q.device)
        scale = self.score_fn.default_scale(self.d_head) if scale is None else check_scale(scale)
        fill = checks.number("fill", fill, minus_inf=True)
        scores = self.score_fn(qh, kh)  # (B, nh, Tq, Tk)
        if record:
            weights, layer = recorded_layer(self, (qh, kh, vh, scores), full_mask, scale, fill)
        else:
            stages = stages_from_scores(scores, scale, full_mask, fill)  # each (B, nh, Tq, Tk)
            weights = stages.weights
        output = self.w_o(self.merge_heads(weights @ vh))  # (B, Tq, d_model)
        if record:
            return (output[0] if unbatched else output), layer
        return (output[0], Stages(*(s[0] for s in stages))) if unbatched else (output, stages)

    # --- loading weights from elsewhere ---

    @classmethod
    def from_torch(cls, m: nn.MultiheadAttention) -> MultiHeadAttention:
        """Copy a torch.nn.MultiheadAttention, unpacking its packed in_proj weights.

        in_proj_weight is [3*d, d]: rows [0, d) project queries, [d, 2d) keys, [2d, 3d) values.
        """
        if m.kdim != m.embed_dim or m.vdim != m.embed_dim:
            raise AttnvizError("from_torch needs q, k and v of the same size (kdim == vdim == embed_dim).")
        if m.bias_k is not None or m.add_zero_attn:
            raise AttnvizError("from_torch does not support add_bias_kv or add_zero_attn.")
        d = m.embed_dim
        bias = m.in_proj_bias is not None
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


def combined_mask(
    n_query: int, n_key: int, mask=None, valid_lens=None, causal: bool = False, device=None
) -> torch.Tensor | None:
    """Combine a boolean mask, valid lengths and causality into one [B or 1, nh or 1, Tq, Tk] mask."""
    combined = None
    if mask is not None:
        combined = as_bool_mask(mask).to(device)
        if combined.dim() == 3:
            combined = combined.unsqueeze(1)  # [B, Tq, Tk] -> [B, 1, Tq, Tk]: one mask per example, all heads
        while combined.dim() < 4:
            combined = combined.unsqueeze(0)  # [Tq, Tk] -> [1, 1, Tq, Tk]
    if valid_lens is not None:
        vl = valid_length_mask(torch.as_tensor(valid_lens).to(device), n_query, n_key)
        combined = vl if combined is None else combined & vl
    if causal:
        cm = causal_cells(n_query, n_key, device=device)[None, None]
        combined = cm if combined is None else combined & cm
    return combined


def recorded_layer(module: MultiHeadAttention, qkv_scores: tuple, mask, scale: float, fill: float):
    """(the weights of every example, the first example's layer as a trace keeps it), from one masked stage computed
    in place on the scores when no gradient needs them. The record keeps a dot product as q and k (its stages
    computed when asked), any other score function as its scores; the values with what each head writes
    (||v W_o[h]||); every row's softmax normaliser from the masked stage the forward itself computed."""
    q, k, v, scores = (t[0].detach() for t in qkv_scores)  # the record is a snapshot: no gradient flows into it
    if mask is not None and (mask.shape[0] > 1 or mask.shape[1] > 1):
        raise AttnvizError("A recorded layer takes one [query, key] mask for every example and head.")
    kept = dict(q=q, k=k) if module.score in ("dot", "scaled_dot") else dict(q=None, k=None, scores=scores.clone())
    if torch.is_grad_enabled():
        masked = masked_from_scores(qkv_scores[3], scale, mask, fill)[1]
    else:
        masked = masked_in_place(qkv_scores[3], scale, mask, fill)  # after the clone above
    mask = torch.ones(masked.shape[-2:], dtype=torch.bool, device=k.device) if mask is None else mask[0, 0]
    with torch.inference_mode():
        written = output_norms.table(v, output_norms.r_factors(module.w_o.weight, module.n_head))
        layer = LayerRecord(
            scale=scale, mask=mask, fill=fill, values=Values(v, written), norms=norms_of(masked[0].detach()), **kept
        )
    return weights_from_masked(masked), layer


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
seeded_module = checks.public(seeded_module, name="attnviz.seeded_module")
seeded_vectors = checks.public(seeded_vectors, name="attnviz.seeded_vectors")
