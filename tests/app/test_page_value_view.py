"""The View control (weights | value-weighted) beside the weights heatmaps of Head statistics, Words, Sentence pairs
and Compare, in AppTest: the drawn value-weighted rows equal Kobayashi et al.'s norms computed in numpy from
transformers' own eager BERT (its hidden states, value and output projections and attention weights), never from
attnviz's numbers; a trace without values greys the control out, says why, and the page draws the weights."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from helpers import array, figures, run_page, z_arrays

import attnviz

TEXT = "The unbelievably tired cat snoozed."
PAIR = "It was tired."


def kobayashi(eager, ids, layer: int, token_types=None) -> np.ndarray:
    """[head, query, key] float64: |weight| * ||v_h(key) @ W_O[h]||, each row rescaled to sum to 1, from the eager
    model alone (BERT: no layer norm before attention, so the layer's input is hidden_states[layer])."""
    types = torch.zeros(1, len(ids), dtype=torch.long) if token_types is None else torch.tensor([token_types])
    with torch.no_grad():
        out = eager(input_ids=torch.tensor([ids]), token_type_ids=types, output_attentions=True,
                    output_hidden_states=True)  # fmt: skip
    att = eager.encoder.layer[layer].attention
    np_ = lambda t: t.detach().double().numpy()  # noqa: E731
    x = np_(out.hidden_states[layer][0])
    v = x @ np_(att.self.value.weight).T + np_(att.self.value.bias)  # [key, d_model]
    w_o = np_(att.output.dense.weight).T  # (in, out): head h feeds rows h*d .. (h+1)*d
    n_head = out.attentions[layer].shape[1]
    d = v.shape[-1] // n_head
    written = np.stack([np.linalg.norm(v[:, h * d : (h + 1) * d] @ w_o[h * d : (h + 1) * d], axis=-1)
                        for h in range(n_head)])  # fmt: skip
    norms = np_(out.attentions[layer][0]) * written[:, None, :]
    return norms / norms.sum(-1, keepdims=True)


def page(path: str, **state):
    at = run_page(path, **state)
    assert not at.exception, [e.value for e in at.exception]
    return at


def control(at):
    return next(w for w in at.get("button_group") if w.proto.label == "View")


def test_head_statistics_opens_a_head_value_weighted_with_hidden_keys_renormalised(bundled, bundled_eager):
    tr = attnviz.trace(bundled, TEXT)
    want = kobayashi(bundled_eager, list(tr.provenance.input_ids), 2)[5]
    at = page("app_pages/headstats.py", text=TEXT, hs_pick="2-5", view="value-weighted")
    assert list(control(at).options) == ["weights", "value-weighted"] and control(at).value == "value-weighted"
    fig = figures(at)["head_weights"]
    np.testing.assert_allclose(z_arrays(fig)[0], want, atol=2e-5)
    title = fig["layout"]["title"]["text"]
    assert (
        "value-weighted" in title
        and "Kobayashi et al. 2020" in title
        and fig["layout"]["meta"]["view"] == ("value-weighted")
    )
    # special tokens hidden and key 0 left out: those columns 0, every other row rescaled to 1 again
    hidden = np.array([t in ("[CLS]", "[SEP]") for t in tr.tokens])
    hidden[0] = True
    kept = np.where(hidden, 0.0, want)
    at = page("app_pages/headstats.py", text=TEXT, hs_pick="2-5", view="value-weighted", hs_hide=True, hs_nosink=True)
    shown = z_arrays(figures(at)["head_weights"])[0]
    np.testing.assert_allclose(shown, kept / kept.sum(-1, keepdims=True), atol=2e-5)
    assert "hidden, rows renormalised" in figures(at)["head_weights"]["layout"]["title"]["text"]


def test_words_merges_value_weighted_rows_and_they_still_sum_to_one(bundled, bundled_eager):
    tr = attnviz.trace(bundled, TEXT)
    want = kobayashi(bundled_eager, list(tr.provenance.input_ids), 2)[4]
    at = page("app_pages/words.py", text=TEXT, layer=2, head=4, view="value-weighted")
    figs = figures(at)
    np.testing.assert_allclose(z_arrays(figs["tokens_head"])[0], want, atol=2e-5)
    groups = [[0], [1], [2, 3, 4, 5, 6], [7], [8], [9, 10, 11, 12], [13], [14]]  # [CLS] the un##bel##ie##va##bly ...
    merged = np.array([[want[np.ix_(a, b)].sum(1).mean() for b in groups] for a in groups])
    words = z_arrays(figs["words_head"])[0]
    np.testing.assert_allclose(words, merged, atol=2e-5)
    np.testing.assert_allclose(words.sum(-1), 1.0, atol=1e-5)
    for name in ("words_head", "tokens_head"):
        assert "value-weighted" in figs[name]["layout"]["title"]["text"], name
    weights = z_arrays(figures(page("app_pages/words.py", text=TEXT, layer=2, head=4))["tokens_head"])[0]
    assert not np.allclose(weights, want, atol=1e-3)  # the control changes the picture


def test_sentence_pairs_blocks_and_head_on_value_weighted_attention(bundled, bundled_eager):
    tr = attnviz.trace(bundled, TEXT, pair=PAIR)
    types = bundled.tokenizer(TEXT, PAIR)["token_type_ids"]
    assert len(types) == tr.n_tokens
    want = kobayashi(bundled_eager, list(tr.provenance.input_ids), 1, types)
    boundary = types.index(1)
    at = page("app_pages/pairs.py", text=TEXT, pair=PAIR, layer=1, head=2, view="value-weighted")
    figs = figures(at)
    np.testing.assert_allclose(z_arrays(figs["pair_head"])[0], want[2], atol=2e-5)
    bars = {t["name"]: array(t["y"]) for t in figs["pair_blocks"]["data"]}
    a, b = slice(0, boundary), slice(boundary, tr.n_tokens)
    np.testing.assert_allclose(bars["A->B"], want[:, a, b].sum(-1).mean(-1), atol=2e-5)
    np.testing.assert_allclose(bars["B->B"], want[:, b, b].sum(-1).mean(-1), atol=2e-5)
    assert figs["pair_blocks"]["layout"]["meta"]["view"] == "value-weighted"


def test_compare_draws_b_minus_a_of_value_weighted_attention(bundled, bundled_eager):
    tr = attnviz.trace(bundled, TEXT)
    ids = list(tr.provenance.input_ids)
    diff = kobayashi(bundled_eager, ids, 4) - kobayashi(bundled_eager, ids, 3)
    at = page("app_pages/compare.py", text=TEXT, layer=3, cmp_mode="layers", cmp_layer=4, view="value-weighted")
    fig = figures(at)["diff_grid"]
    order = fig["layout"]["meta"]["order"]
    assert order == [int(h) for h in np.argsort(-np.abs(diff).reshape(12, -1).mean(1), kind="stable")]
    for z, h in zip(z_arrays(fig), order):
        np.testing.assert_allclose(z, diff[h], atol=3e-5)
    assert "value-weighted" in fig["layout"]["title"]["text"] and "Kobayashi" in fig["layout"]["title"]["text"]


@pytest.mark.parametrize("path", ["app_pages/words.py", "app_pages/headstats.py"])
def test_a_trace_without_values_greys_the_control_out_and_draws_the_weights(tiny_xlnet_dir, path):
    """XLNet computes attention in its own code: weights only. A link asking for value-weighted still opens."""
    at = page(path, text=TEXT, source="hub", model=str(tiny_xlnet_dir), view="value-weighted", hs_pick="0-1", head=1)
    view = control(at)
    assert view.proto.disabled and "no value vectors" in view.proto.help
    name = "tokens_head" if "words" in path else "head_weights"
    fig = figures(at)[name]
    assert fig["layout"]["meta"]["view"] == "weights" and "value-weighted" not in fig["layout"]["title"]["text"]
    tr = attnviz.trace(attnviz.load_model(str(tiny_xlnet_dir)), TEXT)
    assert not tr.has("values")
    np.testing.assert_allclose(z_arrays(fig)[0], tr.stages(0, heads=1).weights[0], atol=1e-6)


def test_opening_the_head_on_the_heads_page_keeps_the_view():
    at = page("app_pages/headstats.py", text=TEXT, hs_pick="2-5", view="value-weighted")
    next(b for b in at.button if b.label == "Open it on the Heads page").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.title[0].value == "Heads" and at.session_state["stage"] == "value-weighted"
    assert at.session_state["layer"] == 2 and at.session_state["head"] == 5
    assert "value-weighted" in figures(at)["head_detail"]["layout"]["title"]["text"]
