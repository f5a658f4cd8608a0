"""The figures each dashboard page draws, for a trace you hold: what `attnviz.show` puts in a notebook.

Every figure comes from the same builders the pages call (attnviz/plots) on the numbers of attnviz/analysis,
so a notebook and the dashboard draw the same picture for the same view. No streamlit here: a page's controls
become keyword arguments (layer, head, stage, ...). Each function returns [(title, figure), ...].
"""

from __future__ import annotations

import inspect

from . import checks
from .analysis import compare as C
from .analysis import geometry as GE
from .analysis import heads as H
from .analysis import masks as M
from .analysis import neuron as N
from .analysis import pairs as P
from .analysis import rollout as R
from .analysis import scaling as S
from .analysis import values as V
from .analysis import words as W
from .errors import InputError, check_index
from .plots import compare as cp
from .plots import distributions as dp
from .plots import geometry as gp
from .plots import headstats as hp
from .plots import heatmaps as hm
from .plots import masks as mp
from .plots import neuron as nv
from .plots import pairs as pp
from .trace import AttentionTrace

#: Token-looking names of special tokens, for traces given without their tokenizer.
SPECIAL_TOKENS = ("[CLS]", "[SEP]", "[PAD]", "[MASK]", "[UNK]", "<s>", "</s>", "<pad>", "<unk>", "<|endoftext|>")


def heads(trace: AttentionTrace, layer: int = 0, head: int = 0, stage: str = "weights", colours: str = "linear"):
    """Every head of a layer on one scale, one head up close (every stage in its hover), every layer x head."""
    if stage not in hm.drawable(trace):
        raise InputError(f"stage {stage!r} is not available here; choose one of {', '.join(hm.drawable(trace))}.")
    where = trace.provenance.layer_label(layer)
    out = [
        (f"Every head of {where} · {stage}", hm.head_grid(trace, layer, stage, colours=colours)),
        (f"Head {head} of {where} up close", hm.head_detail(trace, layer, head, stage, colours=colours)),
    ]
    if trace.n_layer > 1:
        out.append(("All layers × heads", hm.overview(trace, stage, selected=(layer, head), colours=colours)))
    return out


def scaling(trace: AttentionTrace, layer: int = 0, head: int = 0, scale: float | None = None, all_heads=False):
    """Why 1/sqrt(d_k): the spread of the scores, the softmax with and without the scale, each row's peak, the law."""
    law = ("The law behind it: random vectors", dp.law_figure(list(S.law_rows()), trace.d_head or None))
    if not trace.has("scores"):
        return [law]  # no raw scores to rescale; the law still holds
    own = S.model_scale(trace, layer)
    scale = own if scale is None else float(scale)
    cmp = S.compare_scale(trace, layer, scale, None if all_heads else head)
    who = f"mean of {trace.n_head} heads" if all_heads else f"head {head}"
    text = S.scale_label(scale, trace.d_head)
    return [
        ("1 · The spread of the scores", dp.score_histograms(cmp, trace.d_head, text)),
        ("2 · What the softmax makes of them", dp.softmax_pair(cmp, trace.tokens, who, text)),
        ("3 · How peaked each row is", dp.row_saturation(cmp, trace.tokens, text)),
        law,
    ]


def _n_real(trace: AttentionTrace, options: dict) -> int:
    """Tokens before the padding an experiment appended (pad_to): the trailing run of the last token."""
    if not options.get("pad_to"):
        return trace.n_tokens
    n = trace.n_tokens
    while n > 1 and trace.tokens[n - 1] == trace.tokens[-1]:
        n -= 1
    return n


def masks(trace: AttentionTrace, layer: int = 0, head: int = 0, unmasked: AttentionTrace | None = None):
    """What a mask experiment removed: `trace` made with causal=, hide= or pad_to= (attnviz.trace's options),
    `unmasked` the same text traced without them (for where the weight went and what leaks without the mask)."""
    if not trace.has("masked"):
        raise InputError(f"Masks cannot be applied inside this trace. {trace.why_not('masked')}")
    opts = dict(trace.options)
    n_real, who = _n_real(trace, opts), f"head {head}"
    (a, b), _ = hm.windows(trace)
    q, visible = M.demo_row(trace.layer_mask(layer), n_real)
    fills = M.fill_demo(trace.stages(layer, heads=head, queries=(q, q + 1)).scaled[0, 0], visible)
    cut = (slice(a, b), slice(a, b) if trace.n_keys == trace.n_tokens else slice(None))
    stages = trace.stages(layer, heads=head).scaled[0][cut]
    out = [
        (
            "1 · The stages before and after the mask",
            mp.stage_pair(stages, trace.layer_mask(layer)[cut], trace.tokens, who, start=a),
        )
    ]
    if unmasked is not None:
        C.check_comparable(trace, unmasked, "a trace and its unmasked twin")
        own = M.own_causal(unmasked, layer)  # the model's own mask, not the experiment's
        # the unmasked twin is the model as it is, so "largest change" measures the experiment against it
        causal, hide = opts.get("causal", False), opts.get("hide", ())
        rep = M.mask_report(trace, unmasked, unmasked, layer, head, n_real, causal, hide)
        without, with_mask = (
            unmasked.stages(layer, heads=head).weights[0][cut],
            trace.stages(layer, heads=head).weights[0][cut],
        )
        out.append(
            (
                "2 · Where the weight went",
                mp.weights_comparison(without, with_mask, trace.tokens, who, own_causal=own, start=a),
            )
        )
        applied = opts.get("layers")
        out.append(("3 · Leaks, layer by layer", mp.leak_bars(rep, None if applied is None else tuple(applied), own)))
    out.append(("4 · A row with every key masked", mp.fill_demo_figure(fills, trace.key_tokens)))
    return out


def headstats(
    trace: AttentionTrace,
    layer: int = 0,
    head: int = 0,
    statistic: str = "entropy",
    special=None,
    view: str = "weights",
):
    """One statistic per layer x head (Clark et al. 2019) and one head's weights (`view`: "weights" or
    "value-weighted", as on every page). `special`: the tokenizer's special tokens (default: [CLS], <s>, ...)."""
    if statistic not in H.STATISTICS:
        raise InputError(f"unknown statistic {statistic!r}; choose one of {', '.join(H.STATISTICS)}.")
    keys = H.special_keys(trace, special_tokens=SPECIAL_TOKENS if special is None else special)
    stats = H.head_stats(trace, keys)
    label, _, value_range = H.STATISTICS[statistic]
    w = V.attention_view(trace, layer, view, heads=head)[0]
    (a, b), _ = hm.windows(trace)
    title = f"layer {layer}, head {head}: {view}"
    return [
        (f"Head statistics: {label}", hp.stat_grid(stats[statistic], label, value_range, selected=(layer, head))),
        (
            title.capitalize(),
            hp.weights_matrix(w, trace.tokens, title, "head_weights", trace.key_tokens, None, (a, b), view=view),
        ),
    ]


def rollout(trace: AttentionTrace, layer: int = 0, head: int = 0, start: int = 0, end: int | None = None):
    """Attention rollout (Abnar & Zuidema 2020) over layers start..end beside layer end's own weights."""
    if trace.n_tokens != trace.n_keys:
        raise InputError("Rollout needs self-attention: this trace has different query and key tokens.")
    end = trace.n_layer - 1 if end is None else check_index("end layer", end, trace.n_layer)
    span = hm.window(trace.n_tokens)
    roll, raw = R.rollout(trace, start, end), trace.layer(end).weights.mean(axis=0)
    return [
        (
            f"Rollout, layers {start}–{end}",
            hp.weights_matrix(roll, trace.tokens, f"rollout, layers {start}–{end}", "rollout", token_range=span),
        ),
        (
            f"Raw weights of layer {end}, heads averaged",
            hp.weights_matrix(
                raw, trace.tokens, f"raw weights of layer {end}, heads averaged", "raw_last", token_range=span
            ),
        ),
    ]


def neuron(trace: AttentionTrace, layer: int = 0, head: int = 0, query: int = 0):
    """One query token in one head: q, every k, their product, scores, scaled, mask, masked, weights."""
    view = N.neuron_view(trace, layer, head, query)
    title = f"{query:02d} {trace.tokens[query]} in layer {layer}, head {head}"
    return [(title, nv.vectors(view, trace.tokens, trace.key_tokens))]


def words(trace: AttentionTrace, layer: int = 0, head: int = 0, scheme: str | None = None, view: str = "weights"):
    """One head between words (sub-word pieces merged back) beside the same head between tokens (of `view`)."""
    scheme = W.detect_scheme(trace.tokens) if scheme is None else scheme
    special = H.special_keys(trace, special_tokens=SPECIAL_TOKENS)
    groups = W.word_groups(trace.tokens, scheme, special[: trace.n_tokens])
    key_groups = groups if trace.n_keys == trace.n_tokens else W.word_groups(trace.key_tokens, scheme, special)
    labels, key_labels = (
        W.word_labels(trace.tokens, groups, scheme),
        W.word_labels(trace.key_tokens, key_groups, scheme),
    )
    w = V.attention_view(trace, layer, view, heads=head)[0]  # rows of 1 either way, so merged rows are too
    merged = W.merge_words(w, groups, key_groups)
    where = f"layer {layer}, head {head}: {view}"
    return [
        (f"{where}, words", hp.weights_matrix(merged, labels, f"{where}, words", "words_head", key_labels, view=view)),
        (
            f"{where}, tokens",
            hp.weights_matrix(w, trace.tokens, f"{where}, tokens", "tokens_head", trace.key_tokens, view=view),
        ),
    ]


def pairs(trace: AttentionTrace, layer: int = 0, head: int = 0, view: str = "weights"):
    """A sentence pair (attnviz.trace(..., pair=...)): the four blocks per head, the crossing share, one head (of
    `view`: "weights" or "value-weighted")."""
    boundary, rule = P.pair_boundary(trace)
    if boundary is None:
        raise InputError(f"No boundary between two sentences in this trace ({rule}): trace a text with pair=.")
    end = P.real_length(trace.layer_mask(layer), trace.n_tokens)
    w = V.attention_view(trace, layer, view)
    shares = P.block_shares(w, boundary, end)
    title = f"layer {layer}, head {head}: {view}"
    return [
        (f"The four blocks, every head of layer {layer}", pp.block_bars(shares, view=view)),
        ("Attention crossing between the sentences", pp.crossing_bars(shares["crossing"], view=view)),
        (
            "One head with the boundary",
            hp.weights_matrix(w[head], trace.tokens, title, "pair_head", trace.key_tokens, boundary, view=view),
        ),
    ]


def compare(
    trace: AttentionTrace,
    layer: int = 0,
    head: int = 0,
    other: AttentionTrace | None = None,
    other_layer: int | None = None,
    measure: str = "mean_abs",
    view: str = "weights",
):
    """b − a per head (b: `other`, a minimal pair or a second model, or `other_layer` of this trace), most
    changed head first; of `view` ("weights", or "value-weighted" when both traces keep values)."""
    b = trace if other is None else other
    other_layer = (layer + 1) % trace.n_layer if other is None and other_layer is None else other_layer
    what = "two layers" if other is None else "two traces"
    result = C.compare_traces(trace, b, layer, other_layer, what, view)
    order = result.ranked(measure)
    (start, stop), (kstart, kstop) = drawn = hm.windows(trace)
    titles = [f"#{r + 1}: head {h} ({result.change[measure][h]:.3f})" for r, h in enumerate(order)]
    title = f"b − a of the {view}, heads from most to least changed ({C.MEASURES[measure]})"
    diff = result.diff[:, start:stop, kstart:kstop]
    return [
        (
            title,
            cp.diff_grid(
                diff, trace.tokens, title, order, labels=titles, window=drawn, key_tokens=trace.key_tokens, view=view
            ),
        )
    ]


def geometry(
    trace: AttentionTrace,
    layer: int = 0,
    head: int = 0,
    method: str = "pca",
    colour: str = "position",
    normalised: bool = True,
):
    """One head's queries and keys in one space (AttentionViz), then every head of the layer as small multiples (PCA).
    method: pca, umap or tsne; colour: position, token, sentence or role; normalised=False shows the raw vectors."""
    if colour not in GE.COLOURS:
        raise InputError(f"unknown colour {colour!r}; choose one of {', '.join(GE.COLOURS)}.")
    geo = GE.head_geometry(trace, layer, head, method, normalised)
    groups = {"sentence": GE.sentence_groups, "role": GE.role_groups}.get(colour, lambda t: None)(trace)
    title = geometry_title(geo, layer, head, normalised)
    panels = GE.layer_geometry(trace, layer)
    return [
        (title, gp.query_key_space(geo, trace.tokens, trace.key_tokens, colour, groups)),
        (f"Every head of layer {layer} (PCA, normalised)", gp.head_panels(panels, trace.tokens, trace.key_tokens)),
    ]


def geometry_title(geo, layer: int, head: int, normalised: bool) -> str:
    """What the picture is and how far its distances can be trusted, in one line."""
    which = "normalised" if normalised else "raw"
    return (
        f"Layer {layer}, head {head}: queries and keys ({which}, {GE.METHODS[geo.method]}); q·k vs −distance: "
        f"r = {geo.before:.2f} raw, {geo.after:.2f} normalised"
    )


PAGES = {
    "heads": heads,
    "scaling": scaling,
    "masks": masks,
    "headstats": headstats,
    "rollout": rollout,
    "neuron": neuron,
    "words": words,
    "pairs": pairs,
    "compare": compare,
    "geometry": geometry,
}


def page_figures(trace: AttentionTrace, page: str = "heads", layer: int = 0, head: int = 0, **options) -> list:
    """[(title, figure)] of one dashboard page for `trace`; `options` are the page's own controls."""
    if not isinstance(trace, AttentionTrace):
        raise InputError(f"show needs an AttentionTrace (from attnviz.trace), got {type(trace).__name__}.")
    draw = PAGES[checks.choice("page", page, tuple(PAGES))]
    checks.keywords(f"attnviz.show(page={page!r})", options, list(inspect.signature(draw).parameters)[3:])
    layer = check_index("layer", layer, trace.n_layer)
    head = check_index("head", head, trace.n_head)
    return draw(trace, layer, head, **options)
