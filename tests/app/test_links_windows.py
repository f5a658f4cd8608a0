"""Links carry every control (a value a control cannot take is dropped), and long texts draw through windows:
queries and keys chosen apart (the sink column stays for late queries), the Neuron view's keys in a window."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from helpers import APP, array, figures, texts
from streamlit.testing.v1 import AppTest

import attnviz

TEXT = "The cat sat on the mat because it was tired."
LONG = " ".join(["The cat sat on the mat because it was tired, and the dog watched it from the door."] * 20)


def open_link(page: str, params: dict, **state) -> AppTest:
    """A fresh session opened on `page` from a link carrying `params` (plus sidebar `state`)."""
    at = AppTest.from_file(APP, default_timeout=300)
    for key, value in {"text": TEXT, **state}.items():
        at.session_state[key] = value
    at.query_params.update(params)
    at.switch_page(f"app_pages/{page}.py").run()  # the first run opens the page, as a link does
    assert not at.exception, [e.value for e in at.exception]
    return at


def value(at: AppTest, key: str):
    return at.session_state[key]


# controls whose short ids the server writes into the link (url_choice); Streamlit's frontend writes the others
SERVER_WRITTEN = {"hs_stat", "hs_pick", "cmp_mode", "cmp_measure", "ro_query", "nv_query", "w_scheme", "max_tokens"}

# page, a link's good values and what the controls show, garbage and the defaults the controls fall back to
CASES = {
    "headstats": (
        {"hs_stat": "previous", "hs_pick": "2-5", "hs_hide": "true"},
        {"hs_stat": "previous", "hs_pick": "2-5", "hs_hide": True},
        {"hs_stat": "garbage", "hs_pick": "99-99", "hs_hide": "maybe"},
        {"hs_stat": "entropy", "hs_hide": False},
    ),
    "compare": (
        {"cmp_mode": "layers", "cmp_layer": "4", "cmp_measure": "js"},
        {"cmp_mode": "layers", "cmp_layer": 4, "cmp_measure": "js"},
        {"cmp_mode": "both", "cmp_measure": "nope"},
        {"cmp_mode": "sentences", "cmp_measure": "mean_abs"},
    ),
    "rollout": (
        {"ro_layers": ["1", "4"], "ro_query": "3"},
        {"ro_layers": (1, 4), "ro_query": 3},
        {"ro_layers": ["4", "99"], "ro_query": "999"},
        {"ro_layers": (0, 5), "ro_query": 0},
    ),
    "neuron": ({"nv_query": "5", "head": "7"}, {"nv_query": 5, "head": 7}, {"nv_query": "-1"}, {"nv_query": 0}),
    "words": ({"w_scheme": "bpe"}, {"w_scheme": "bpe"}, {"w_scheme": "latin"}, {"w_scheme": "auto"}),
    "scores": (
        {"sc_tab": "Random vectors", "sc_d": "256", "sc_seed": "12"},
        {"sc_tab": "Random vectors", "sc_d": 256, "sc_seed": 12},
        {"sc_tab": "No such tab"},
        {"sc_tab": "Your sentence"},
    ),
}


@pytest.mark.parametrize("page", list(CASES))
def test_a_link_sets_each_control_and_garbage_falls_back_to_the_default(page):
    good, shown, garbage, defaults = CASES[page]
    at = open_link(page, good)
    assert {k: value(at, k) for k in shown} == shown
    for key in good.keys() & SERVER_WRITTEN:  # the server writes these ids (AppTest has no frontend for the rest)
        assert at.query_params.get(key) == good[key], key
    at = open_link(page, garbage)
    assert {k: value(at, k) for k in defaults} == defaults
    assert not set(garbage) & set(at.query_params), at.query_params  # dropped from the link too
    assert not texts(at, "error") and not texts(at, "exception")


def test_garbage_in_the_random_vectors_tab_of_a_link_falls_back_to_the_defaults():
    """The tab's controls exist only while it is open (a lazy tab): their garbage is read, and dropped, there."""
    at = open_link("scores", {"sc_tab": "Random vectors", "sc_d": "7", "sc_seed": "-5"})
    assert {k: value(at, k) for k in ("sc_tab", "sc_d", "sc_seed")} == {
        "sc_tab": "Random vectors",
        "sc_d": 64,
        "sc_seed": 0,
    }
    assert not {"sc_d", "sc_seed"} & set(at.query_params), at.query_params
    assert not texts(at, "error") and not texts(at, "exception")


def test_the_token_limit_is_a_sidebar_setting_capped_by_model_and_server():
    at = open_link("heads", {"max_tokens": "64"}, text=LONG)
    slider = at.select_slider(key="max_tokens")
    assert slider.value == 64 and slider.options[-1] == "512"  # the bundled model reads 512, the server allows 512
    assert any("kept the first 64" in t for t in texts(at, "warning")), texts(at, "warning")
    assert at.query_params.get("max_tokens") in ("64", ["64"])
    grid = figures(at)["head_grid"]
    assert len(grid["layout"]["yaxis"]["categoryarray"]) == 64
    at = open_link("heads", {"max_tokens": "100000"}, text=LONG)  # above every cap: dropped, the default kept
    assert at.select_slider(key="max_tokens").value == 512 and "max_tokens" not in at.query_params


@pytest.fixture(scope="module")
def long_trace(bundled):
    return attnviz.trace(bundled, LONG)


def test_late_queries_keep_the_sink_column_and_a_wide_window_says_what_it_draws(long_trace):
    tr, layer, head = long_trace, 2, 3
    assert tr.n_tokens > 300
    at = open_link("heads", {"queries": ["250", "378"], "head": str(head)}, text=LONG, layer=layer)
    assert at.slider(key="queries").value == (250, 378) and at.slider(key="keys").value == (0, 128)
    detail = figures(at)["head_detail"]
    z, (trace, _cells) = array(detail["data"][0]["z"]), detail["data"]  # the heatmap, then its click targets
    assert (trace["y0"], trace["x0"]) == (250, 0) and z.shape == (128, 128)
    want = tr.layer(layer).weights[head]
    np.testing.assert_allclose(z[:, 0], want[250:378, 0], atol=1e-6)  # the first key's column, for late queries
    np.testing.assert_allclose(z, want[250:378, :128], atol=1e-6)
    assert "queries 250–377, keys 0–127" in detail["layout"]["title"]["text"]
    grid = figures(at)["head_grid"]
    assert grid["layout"]["xaxis"]["range"] == [-0.5, 127.5] and grid["layout"]["yaxis"]["range"] == [377.5, 249.5]

    at = open_link("heads", {"queries": ["0", "300"]}, text=LONG)  # wider than the page draws
    assert any("Asked for 0–299" in t and "draws 0–127" in t for t in texts(at, "caption")), texts(at, "caption")
    assert (
        figures(at)["head_detail"]["data"][0]["y0"] == 0
        and len(array(figures(at)["head_detail"]["data"][0]["z"])) == 128
    )


N = 2048


@pytest.fixture(scope="module")
def long_llama(family_dir):
    return str(family_dir("long_llama"))


def test_the_neuron_view_at_2048_tokens_sends_a_small_figure_with_the_sink_in_view(long_llama, monkeypatch):
    monkeypatch.setenv("ATTNVIZ_MAX_TOKENS", str(N))
    text = " ".join(["the cat sat on the mat because it was tired ."] * 200)
    query, head = 2000, 1
    params = {"nv_query": str(query), "head": str(head), "keys": ["1900", "2028"]}
    at = open_link("neuron", params, source="hub", model=long_llama, text=text, layer=1)
    fig = figures(at)["neuron_vectors"]
    size = len(json.dumps(fig))
    assert size < 400_000, f"{size / 1e3:.0f} kB for one query's row"  # every key would be ~16x this
    keys = [0, *range(1900, 2028)]  # key 0 (the sink) kept in view, then the window
    assert fig["layout"]["meta"]["keys"] == [0, 2028] and array(fig["data"][1]["z"]).shape[0] == len(keys)
    table = at.dataframe[0].value
    assert [int(k.split()[0]) for k in table["key"]] == keys

    # the weights, recomputed here from the trace's stored q and k: q·k × scale, causal, softmax over every key
    loaded = attnviz.load_model(long_llama)
    tr = attnviz.trace(loaded, text, max_tokens=N)
    rec = tr.layers[1]
    k = rec.k[head // (rec.q.shape[0] // rec.k.shape[0])].double()
    scores = (k @ rec.q[head, query].double()) * float(rec.scale)
    scores[query + 1 :] = -torch.inf
    weights = torch.softmax(scores, 0).numpy()
    np.testing.assert_allclose(table["weight"].to_numpy(np.float64), weights[keys], atol=1e-6)
    assert weights[0] > 0 and table["weight"].iloc[0] == pytest.approx(weights[0], abs=1e-6)


def test_a_moved_window_redraws_the_views_kept_for_revisits(long_trace):
    """Scaling, Score functions and Compare keep only the drawn window of their results for a revisit: moving the
    window must draw the new tokens, and moving it back the first figure again."""
    tr = long_trace
    at = open_link("scaling", {}, text=LONG)
    first = figures(at)["softmax_pair"]
    at.slider(key="tokens").set_value((100, 228)).run()
    moved = next(t for t in figures(at)["softmax_pair"]["data"] if t.get("name") == "softmax scaled")
    assert "tokens 100–227" in json.dumps(figures(at)["softmax_pair"]["layout"], ensure_ascii=False)
    np.testing.assert_allclose(array(moved["z"]), tr.layer(0).weights[0, 100:228, 100:228], atol=1e-6)  # the model's
    at.slider(key="tokens").set_value((0, 128)).run()
    assert figures(at)["softmax_pair"] == first
    for page, figure in (("scores", "module_score_weights"), ("compare", "diff_grid")):
        at = open_link(page, {}, text=LONG)
        first = figures(at)[figure]
        at.slider(key="queries").set_value((100, 228)).run()
        moved = figures(at)[figure]
        assert {t["y0"] for t in moved["data"] if t["type"] == "heatmap"} == {100}, page  # every panel
        assert "queries 100–227" in json.dumps(moved["layout"], ensure_ascii=False), page
        at.slider(key="queries").set_value((0, 128)).run()
        assert figures(at)[figure] == first, page
