"""The Masks page in AppTest: each mask control has the effect the figures claim."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import array, figures, run_page

import attnviz
from attnviz.ui import DEFAULT_TEXT


def z(at, figure: str, name: str | None = None) -> np.ndarray:
    fig = figures(at)[figure]
    t = fig["data"][0] if name is None else next(t for t in fig["data"] if t.get("name") == name)
    return array(t["z"])


def bar(at, name: str) -> np.ndarray:
    return array(next(t for t in figures(at)["mask_leak"]["data"] if t.get("name") == name)["y"])


@pytest.fixture
def page():
    at = run_page("app_pages/masks.py")
    assert not at.exception, [e.value for e in at.exception]
    return at


def run(at, **widgets):
    """Set page widgets by key and rerun once."""
    kinds = {
        "causal": at.toggle, "pad_mask": at.toggle, "pad_to": at.number_input, "hide": at.multiselect,
        "apply": at.radio, "fill": at.radio, "head": at.slider,
    }  # fmt: skip
    for key, value in widgets.items():
        kinds[key](key=key).set_value(value)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


# --- tests ---------------------------------------------------------------------------------------------------


def test_an_encoder_opens_without_the_causal_mask_and_the_toggle_removes_the_upper_triangle(page):
    assert set(figures(page)) == {"mask_stages", "mask_weights", "mask_leak", "fill_demo"}
    # the bundled BERT opens with no mask of the page's own: padding (Pad to N) is the first mask a learner adds
    assert page.toggle(key="causal").value is False and np.isfinite(z(page, "mask_stages", "masked")).all()
    run(page, causal=True)
    masked = z(page, "mask_stages", "masked")
    upper = np.triu(np.ones_like(masked, bool), k=1)
    assert np.isnan(masked[upper]).all() and np.isfinite(masked[~upper]).all()  # masked cells are NaN, drawn grey
    w = z(page, "mask_weights", "with")
    assert (w[upper] == 0).all()
    np.testing.assert_allclose(w.sum(-1), 1, atol=1e-5)
    assert (z(page, "mask_weights", "without")[upper] > 0).all()
    assert bar(page, "with your masks")[0] == 0 and bar(page, "every key visible")[0] > 0  # no look-ahead in layer 0
    assert any("Forward-pass experiment" in m.value for m in page.markdown)


def test_no_mask_means_no_difference(page):
    run(page, causal=False)
    assert np.isfinite(z(page, "mask_stages", "masked")).all()
    assert (z(page, "mask_weights", "difference") == 0).all()
    assert any("Nothing is masked" in i.value for i in page.info)


def test_hiding_a_token_zeroes_its_column(page):
    run(page, causal=False, hide=[3])
    w = z(page, "mask_weights", "with")
    assert (w[:, 3] == 0).all() and (np.delete(w, 3, axis=1) > 0).all()
    assert np.isnan(z(page, "mask_stages", "masked")[:, 3]).all()
    diff = z(page, "mask_weights", "difference")
    assert (diff[:, 3] < 0).all() and (np.delete(diff, 3, axis=1) >= 0).all()  # weight moved off the hidden key


def test_padding_leaks_without_the_padding_mask_and_not_with_it(page):
    run(page, causal=False, pad_to=20)
    tokens = figures(page)["mask_stages"]["layout"]["xaxis"]["ticktext"]
    assert len(tokens) == 20 and tokens[-1].endswith("[PAD]")
    assert (bar(page, "with your masks") == 0).all()
    assert (bar(page, "every key visible")[0] > 0).all()
    run(page, pad_mask=False)
    leak = bar(page, "with your masks")
    assert leak[0] > 0 and (leak[1:] == 0).all()  # only layer 0 lost its padding mask
    run(page, apply="all")
    assert (bar(page, "with your masks") > 0).all()


def test_fill_minus_inf_gives_a_zero_row_on_a_fully_masked_row(page):
    run(page, causal=True, hide=[0])  # causal + hide token 0: query 0 may attend nothing
    assert any("query rows [0]" in m.value for m in page.markdown)
    run(page, fill="-10000")
    w = z(page, "mask_weights", "with")
    np.testing.assert_allclose(w[0], 1 / w.shape[1], rtol=1e-5)  # a finite fill: uniform over every key
    run(page, fill="-inf")
    w = z(page, "mask_weights", "with")
    assert (w[0] == 0).all() and np.allclose(w[1:].sum(-1), 1, atol=1e-5)
    demo = z(page, "fill_demo")
    labels = figures(page)["fill_demo"]["layout"]["yaxis"]["ticktext"]
    rows = {label.split(":")[0]: demo[i] for i, label in enumerate(labels) if "every key masked" in label}
    assert (rows["fill -inf"] == 0).all()
    np.testing.assert_allclose(rows["fill -10000"], 1 / demo.shape[1], rtol=1e-5)
    assert any("◀ chosen" in label and "-inf" in label for label in labels)


def test_this_layer_only_leaves_earlier_layers_untouched(page):
    page.session_state["layer"] = 2  # a sidebar widget: set its state (AppTest drops sidebar widgets after a rerun)
    run(page, causal=True)
    change = bar(page, "max |Δ weight|")
    assert (change[:2] == 0).all() and (change[2:] > 0).all()
    assert any("layer 2 only" in m.value for m in page.markdown)
    run(page, apply="all")
    assert (bar(page, "max |Δ weight|") > 0).all()


def test_head_changes_the_heatmaps(page):
    first = z(page, "mask_stages", "scaled")
    run(page, head=7)
    assert not np.allclose(first, z(page, "mask_stages", "scaled"))


def test_our_module_has_no_padding_but_masks_still_work():
    page = run_page("app_pages/masks.py", source="module")  # it cannot pad: it opens with the causal mask on
    assert not page.exception
    assert page.number_input(key="pad_to").disabled and page.radio(key="apply").disabled
    masked = z(page, "mask_stages", "masked")
    assert np.isnan(masked[np.triu(np.ones_like(masked, bool), k=1)]).all()


def test_padding_mask_off_in_one_layer_is_measured_against_the_models_own_trace(page, bundled):
    run(page, causal=False, pad_to=20)
    run(page, pad_mask=False)  # this layer only: layer 0
    exp = attnviz.trace(bundled, DEFAULT_TEXT, pad_to=20, pad_mask=False, layers=(0,))
    own = attnviz.trace(bundled, DEFAULT_TEXT, pad_to=20)  # the model as it is: its padding mask in every layer
    want = [np.abs(exp.layer(i).weights - own.layer(i).weights).max() for i in range(own.n_layer)]
    np.testing.assert_allclose(bar(page, "max |Δ weight|"), want, atol=1e-6)
    assert (np.asarray(want) > 0).all()  # layer 0 lost its mask; later layers read its changed output
    fig = figures(page)["mask_leak"]
    x = next(t for t in fig["data"] if t.get("name") == "with your masks")["x"]
    assert x == ["0*"] + [f"{i}" for i in range(1, 6)]  # the star: the layer with your masks
    assert fig["layout"]["xaxis"]["title"]["text"] == "layer (* your masks; others the model's own)"
    note = "Every other layer keeps the model's own mask (its padding mask)."
    assert any(note in m.value for m in page.markdown)
    assert any("ran with the model's own mask (its padding mask) in both series" in m.value for m in page.markdown)


def test_a_causal_model_query_with_no_visible_key_shows_where_its_weight_goes(tiny_gpt2_dir, tiny_text):
    at = run_page("app_pages/masks.py", source="hub", model=str(tiny_gpt2_dir), text=tiny_text)
    assert not at.exception, [e.value for e in at.exception]
    run(at, hide=[0], fill="-10000")  # query 0's only visible key is hidden
    w = z(at, "mask_weights", "with")
    n = w.shape[1]
    np.testing.assert_allclose(w[0], 1 / n, rtol=1e-5)  # what the model computes: uniform over every key
    leak = bar(at, "with your masks")  # row 0 puts all its weight where it should not; every other row none
    assert leak[0] == pytest.approx(1 / n, rel=1e-4)
    share = f"{w[0, 1:].sum():.0%}"
    assert share == f"{(n - 1) / n:.0%}"
    assert any(f"{share} of its weight on future positions" in m.value for m in at.warning)
    run(at, fill="-inf")
    assert any("all zeros" in m.value for m in at.warning) and bar(at, "with your masks")[0] == 0


def test_select_all_in_hide_tokens_is_refused_and_the_page_recovers(page):
    n = len(page.multiselect(key="hide").options)
    run(page, hide=list(range(n)))
    assert any("Keep at least one token visible" in w.value for w in page.warning)
    assert not figures(page)
    run(page, hide=[0])
    assert set(figures(page)) == {"mask_stages", "mask_weights", "mask_leak", "fill_demo"}
