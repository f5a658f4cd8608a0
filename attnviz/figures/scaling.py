"""The figures of the pages about the steps before the softmax: Scaling (why 1/sqrt(d_k)) and Masks."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..analysis import compare as C
from ..analysis import masks as M
from ..analysis import scaling as S
from ..analysis.masks import MaskReport
from ..analysis.scaling import ScalingComparison
from ..errors import InputError
from ..plots import distributions as dp
from ..plots import heatmaps as hm
from ..plots import masks as mp
from ..trace import AttentionTrace
from .drawn import Drawn


def law(d_head: int | None = None) -> tuple[str, object]:
    """The random-vector law behind the scale, with a model's d_k marked (None: none)."""
    return "The law behind it: random vectors", dp.law_figure(list(S.law_rows()), d_head)


@dataclass(frozen=True)
class Scaling(Drawn):
    """`compared`: the scores before and after the scale (None for a trace without raw scores)."""

    compared: ScalingComparison | None = field(default=None)


def scaling(
    trace: AttentionTrace,
    layer: int = 0,
    head: int = 0,
    scale: float | None = None,
    all_heads=False,
    token_range=None,
) -> Scaling:
    """Why 1/sqrt(d_k): the spread of the scores, the softmax with and without the scale, each row's peak, the law.
    scale: what the scores are multiplied by (None: the model's own); token_range: the tokens the softmax pair draws."""
    if not trace.has("scores"):
        return Scaling((law(trace.d_head or None),))  # no raw scores to rescale; the law still holds
    scale = S.model_scale(trace, layer) if scale is None else float(scale)
    drawn = hm.window(trace.n_tokens, token_range)
    cmp = S.compare_scale(trace, layer, scale, None if all_heads else head, window=drawn)
    who = f"mean of {trace.n_head} heads" if all_heads else f"head {head}"
    text = S.scale_label(scale, trace.d_head)
    out = (
        ("1 · The spread of the scores", dp.score_histograms(cmp, trace.d_head, text)),
        ("2 · What the softmax makes of them", dp.softmax_pair(cmp, trace.tokens, who, text)),
        ("3 · How peaked each row is", dp.row_saturation(cmp, trace.tokens, text)),
        law(trace.d_head or None),
    )
    return Scaling(out, cmp)


def _n_real(trace: AttentionTrace, options: dict) -> int:
    """Tokens before the padding an experiment appended (pad_to): the trailing run of the last token."""
    if not options.get("pad_to"):
        return trace.n_tokens
    n = trace.n_tokens
    while n > 1 and trace.tokens[n - 1] == trace.tokens[-1]:
        n -= 1
    return n


@dataclass(frozen=True)
class Masks(Drawn):
    """`report`: the experiment's leaks, changes, rows with no visible key and fill demo (None without `unmasked`)."""

    report: MaskReport | None = field(default=None)


def masks(
    trace: AttentionTrace,
    layer: int = 0,
    head: int = 0,
    unmasked: AttentionTrace | None = None,
    own: AttentionTrace | None = None,
    n_real: int | None = None,
    n_real_keys: int | None = None,
    fill: str | None = None,
    token_range=None,
    boundary: int | None = None,
    cross: bool | None = None,
) -> Masks:
    """What a mask experiment removed: `trace` made with causal=, hide= or pad_to= (attnviz.trace's options),
    `unmasked` the same text traced without them (for where the weight went and what leaks without the mask), `own`
    the model as it is (what the change is measured from; default `unmasked`). n_real / n_real_keys: the queries /
    keys that are not padding; fill: the fill's name, marked on chart 4; token_range: the query rows drawn; cross:
    the keys are another text, drawn whole (default: when their count differs)."""
    if not trace.has("masked"):
        raise InputError(f"Masks cannot be applied inside this trace. {trace.why_not('masked')}")
    opts = dict(trace.options)
    n_real = _n_real(trace, opts) if n_real is None else n_real
    cross = trace.n_keys != trace.n_tokens if cross is None else cross
    a, b = hm.window(trace.n_tokens, token_range)
    who = f"head {head}" + (f", tokens {a}–{b - 1} of {trace.n_tokens:,}" if (a, b) != (0, trace.n_tokens) else "")
    cut = dict(queries=(a, b), keys=None if cross else (a, b))  # the drawn window alone is computed
    keys = trace.key_tokens if cross else None
    drawn = dict(start=a, boundary=boundary)
    scaled = trace.stages(layer, heads=head, **cut).scaled[0]
    mask = trace.layer_mask(layer, cut["queries"], cut["keys"])
    out = [
        (
            "1 · The stages before and after the mask",
            mp.stage_pair(scaled, mask, trace.tokens, who, key_tokens=keys, **drawn),
        )
    ]
    rep = None
    if unmasked is not None:
        rep, compared = _compared(trace, unmasked, own, layer, head, n_real, n_real_keys, cut, keys, who, drawn)
        out += compared
        fills = rep.fills
    else:
        q, visible = M.demo_row(trace.layer_mask(layer), n_real)
        fills = M.fill_demo(trace.stages(layer, heads=head, queries=(q, q + 1)).scaled[0, 0], visible)
    out.append(("4 · A row with every key masked", mp.fill_demo_figure(fills, trace.key_tokens, fill)))
    return Masks(tuple(out), rep)


def _compared(trace, unmasked, own, layer, head, n_real, n_real_keys, cut, keys, who, drawn) -> tuple:
    """(the mask report, charts 2 and 3): the experiment against the same text without its masks."""
    C.check_comparable(trace, unmasked, "a trace and its unmasked twin")
    own = unmasked if own is None else own
    own_causal = M.own_causal(own, layer)  # the model's own mask, not the experiment's
    opts = dict(trace.options)
    causal, hide, applied = opts.get("causal", False), opts.get("hide", ()), opts.get("layers")
    rep = M.mask_report(trace, unmasked, own, layer, head, n_real, causal, hide, n_real_keys)
    without, with_mask = (t.stages(layer, heads=head, **cut).weights[0] for t in (unmasked, trace))
    weights = mp.weights_comparison(without, with_mask, trace.tokens, who, own_causal, key_tokens=keys, **drawn)
    leaks = mp.leak_bars(rep, None if applied is None else tuple(applied), own_causal)
    return rep, [("2 · Where the weight went", weights), ("3 · Leaks, layer by layer", leaks)]
