"""Every public entry point, given hostile values one argument at a time (NaN, infinities, wrong types, wrong ranks,
negative and enormous sizes, a lone surrogate, range(10**7), an unknown keyword), raises an attnviz error that names
the argument, within a second (hypothesis deadline), and never a raw exception or a hang.

Each argument has a kind; the hostile values of a kind are ones that kind can never take (a -1 is a valid index, so
indices get no -1; -inf is a valid fill). The good call of each entry point is run once too, so the test cannot pass
by an entry point that refuses everything.
"""

from __future__ import annotations

import inspect
import math

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import attnviz
from attnviz import checks, export
from attnviz.analysis import geometry, neuron, rollout, sinks, values
from attnviz.module import multihead
from attnviz.trace import file

NAN, INF = float("nan"), float("inf")
ODD = object()
HUGE = [2**40, 10**30, 10**5000]

#: Hostile values per kind of argument (none of them valid for that kind).
KINDS = {
    "index": [NAN, INF, -INF, "1", 1.5, 2.0, True, [1], ODD, None, *HUGE, -(2**40)],
    "count": [NAN, INF, "3", 2.0, True, ODD, -1, -(2**40), *HUGE],
    "scale": [NAN, INF, -INF, "x", True, ODD, [1.0], 0, 1e300, -1e300, 10**5000],
    "fill": [NAN, INF, "x", True, ODD, [1.0], 10**5000],
    "flag": [1, 0, 0.0, "yes", NAN, ODD, [True]],
    "text": [123, 1.5, NAN, b"x", ["a"], ODD, "ok\ud800", "\udfff"],
    "positions": ["ab", NAN, 1.5, [NAN], [1.5], ["1"], [2**40], [-1], [10**30], range(10**7), ODD, [[1, 2]]],
    "sizes": ["ab", NAN, 4, [NAN], [1.5], [0], [-4], [2**40], range(10**7), ODD],
    "blob": [123, NAN, "text", ["a"], ODD],
    "seed": [NAN, INF, "3", 2.0, True, ODD, -1, 10**30, 10**5000],
    "heads": ["ab", NAN, 1.5, [NAN], [1.5], ["1"], [2**40], [10**5000], range(10**7), ODD, [[1, 2]]],
    "lengths": ["x", 1.0, NAN, ODD, np.zeros((2,) * 7), np.array(["a"]), np.array([NAN]), np.array([-1]), [1.5]],
    "layer_scale": [NAN, INF, "x", True, ODD, 0, 1e300, [NAN], [1.0, 2.0, 3.0]],
    "layer_fill": [NAN, INF, "x", True, ODD, [NAN], [1.0, 2.0, 3.0]],
    "tensor": ["x", 1.0, NAN, ODD, b"xy", np.array(["a", "b"])],
    "window": [5, NAN, "ab", (NAN, 2), (0, "x"), (0.5, 2), ODD, (1, 2, 3)],
    "choice": [1, NAN, "no-such-thing", ODD, b"heads"],
    "array": ["x", 1.0, NAN, ODD, np.zeros(7), np.zeros((2,) * 7), np.array(["a", "b"]), np.full((2, 8), NAN)],
    "model": [123, NAN, b"gpt2", ["gpt2"], ODD, None, torch.nn.Linear(2, 2)],
    "hf_model": [123, NAN, "gpt2", ODD, None, torch.nn.Linear(2, 2)],
    "tokenizer": [123, NAN, "gpt2", ODD, None, torch.nn.Linear(2, 2)],
    "head_pairs": ["ab", NAN, 1.5, [NAN], [(0, NAN)], [(0, 1.5)], [(0, "1")], [(2**40, 0)], [(0, 10**30)],
                   [(0, 1, 2)], [], range(10**7), ODD, [1, 2]],
    "target": [NAN, INF, 1.5, True, ODD, [1], 2**40, 10**5000, "ok\ud800", "x" * 101, "two words"],
    "trace": [123, "x", NAN, ODD, np.zeros((2, 2))],
    "tokens": [123, "ab", NAN, [1], [NAN], ODD, range(10**7)],
    "path": [123, NAN, ODD, ["a"], b"x", "\ud800"],
    "callable": [123, "x", NAN, ODD],
    "limits": [123, "x", ODD, {"max_bytes": 1}],
    "corpus": [123, NAN, ODD, b"x", [1, 2], ["ok", 3], [NAN], "\ud800", "no/such/corpus.txt"],
    "layer_or_none": [NAN, INF, "1", 1.5, 2.0, True, [1], ODD, *HUGE, -(2**40)],
    "most": [NAN, INF, "3", 2.0, True, ODD, -1, 0, -(2**40)],
}  # fmt: skip


def hostile(kind: str):
    return st.sampled_from(KINDS[kind])


@pytest.fixture(scope="module")
def world(bundled, tiny_gpt2, tiny_gpt2_dir):
    """The things the calls act on: the bundled model, small traces of it (one of a pair), our module, a
    given-weights trace, a causal language model (the tiny GPT-2) and a transformers model of our own for from_model."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    trace = attnviz.trace(bundled, "The cat sat.")
    mha = attnviz.MultiHeadAttention(8, 2)
    src = attnviz.ModuleSource(bundled, inputs="random", d_model=8, n_head=2)
    return dict(
        model=bundled, trace=trace, mha=mha, src=src, x=torch.randn(3, 8), weights=trace.weights, lm=tiny_gpt2,
        pair=attnviz.trace(bundled, "The cat sat.", pair="A dog ran."), other=attnviz.trace(bundled, "The dog sat."),
        lm_dir=str(tiny_gpt2_dir), hf=AutoModelForCausalLM.from_pretrained(tiny_gpt2_dir),
        tokenizer=AutoTokenizer.from_pretrained(tiny_gpt2_dir),
    )  # fmt: skip


# entry point -> (call taking the world and keyword arguments, good keyword arguments, {argument: kind})
ENTRIES = {
    "trace": (lambda w, **a: attnviz.trace(w["model"], **a), dict(text="The cat sat."),
              dict(text="text", pair="text", max_tokens="count", pad_to="count", hide="positions", layers="positions",
                   scale="scale", fill="fill", causal="flag", pad_mask="flag", values="flag")),
    "trace our module": (lambda w, **a: attnviz.trace(w["src"], **a), dict(text="The cat sat."),
                         dict(text="text", max_tokens="count", hide="positions", scale="scale", fill="fill",
                              causal="flag")),
    "ModuleSource": (lambda w, **a: attnviz.ModuleSource(w["model"], **a), dict(inputs="random"),
                     dict(d_model="count", n_head="count", seed="seed", inputs="choice", weights="choice",
                          layer="index", cross="flag", n_keys="count", valid_keys="count", score="choice", bias="flag")),
    "MultiHeadAttention": (lambda w, **a: multihead.MultiHeadAttention(**a), dict(d_model=8, n_head=2),
                           dict(d_model="count", n_head="count", bias="flag", causal="flag", score="choice",
                                score_hidden="count", score_seed="seed")),
    "MultiHeadAttention.forward": (lambda w, **a: w["mha"](**a), dict(q=torch.randn(3, 8)),
                                   dict(q="array", k="array", v="array", mask="array", valid_lens="lengths",
                                        causal="flag", scale="scale", fill="fill")),
    "causal_mask": (lambda w, **a: attnviz.causal_mask(**a), dict(n_query=3), dict(n_query="count", n_key="count")),
    "valid_length_mask": (lambda w, **a: attnviz.valid_length_mask(**a),
                          dict(valid_lens=torch.tensor([2]), n_query=3, n_key=3),
                          dict(valid_lens="lengths", n_query="count", n_key="count")),
    "seeded_vectors": (lambda w, **a: multihead.seeded_vectors(**a), dict(n=3, d=4),
                       dict(n="count", d="count", seed="seed")),
    "seeded_module": (lambda w, **a: multihead.seeded_module(**a), dict(d_model=8, n_head=2),
                      dict(d_model="count", n_head="count", bias="flag", seed="seed", score="choice")),
    "default_scale": (lambda w, **a: attnviz.default_scale(**a), dict(d_head=4), dict(d_head="count")),
    "softmax": (lambda w, **a: attnviz.softmax(**a), dict(x=torch.randn(2, 3)), dict(x="tensor")),
    "stages_from_scores": (lambda w, **a: attnviz.stages_from_scores(**a), dict(scores=torch.randn(2, 3), scale=0.5),
                           dict(scores="tensor", scale="scale", mask="array", fill="fill", softcap="scale")),
    "attention": (lambda w, **a: attnviz.attention(**a),
                  dict(q=torch.randn(2, 4), k=torch.randn(3, 4), v=torch.randn(3, 4)),
                  dict(q="array", k="array", v="array", mask="array", scale="scale", fill="fill")),
    "from_scores": (lambda w, **a: attnviz.AttentionTrace.from_scores(**a),
                    dict(tokens=["a", "b"], scores=np.zeros((1, 2, 2, 2)), scale=0.5),
                    dict(tokens="text", scores="array", scale="layer_scale", mask="array", fill="layer_fill", bias="array")),
    "from_weights": (lambda w, **a: attnviz.AttentionTrace.from_weights(**a),
                     dict(tokens=["a", "b"], weights=np.full((1, 2, 2, 2), 0.5)),
                     dict(tokens="text", weights="array", why="text")),
    "from_attentions": (lambda w, **a: attnviz.AttentionTrace.from_attentions(**a),
                        dict(attentions=(torch.full((1, 2, 2, 2), 0.5),), tokens=["a", "b"]),
                        dict(attentions="array", tokens="text", model="text", item="count")),
    "stages": (lambda w, **a: w["trace"].stages(**a), dict(layer=0),
               dict(layer="index", heads="heads", queries="window", keys="window", device="flag")),
    "column": (lambda w, **a: w["trace"].column(**a), dict(layer=0, key=1), dict(layer="index", key="index")),
    "lse": (lambda w, **a: w["trace"].lse(**a), dict(layer=0), dict(layer="index", heads="heads")),
    "layer_mask": (lambda w, **a: w["trace"].layer_mask(**a), dict(layer=0),
                   dict(layer="index", queries="window", keys="window")),
    "vectors": (lambda w, **a: w["trace"].vectors(**a), dict(layer=0, head=1), dict(layer="index", head="index")),
    "facts": (lambda w, **a: w["trace"].facts(**a), dict(layer=0), dict(layer="index")),
    "recompute": (lambda w, **a: w["trace"].recompute(**a), dict(layer=0),
                  dict(layer="index", scale="scale", mask="array", fill="fill")),
    "values": (lambda w, **a: w["trace"].values(**a), dict(layer=0, head=0), dict(layer="index", head="index")),
    "output_norms": (lambda w, **a: w["trace"].output_norms(**a), dict(layer=0),
                     dict(layer="index", heads="heads", keys="window")),
    "why_not": (lambda w, **a: w["trace"].why_not(**a), dict(stage="scores"), dict(stage="choice")),
    "show": (lambda w, **a: attnviz.show(w["trace"], **a), dict(page="heads"),
             dict(page="choice", layer="index", head="index")),
    "trace_npz": (lambda w, **a: export.trace_npz(w["trace"], **a), dict(), dict(text="text", pair="text")),
    "load_npz": (lambda w, **a: attnviz.export.load_npz(**a), dict(data=b""), dict(data="blob", max_tokens="count")),
    "trace.file.load_npz": (lambda w, **a: file.load_npz(**a), dict(data=b""), dict(data="blob", max_tokens="count")),
    "value_norms": (lambda w, **a: values.value_norms(w["trace"], **a), dict(layer=0),
                    dict(layer="index", heads="heads", queries="window", keys="window")),
    "neuron_view": (lambda w, **a: neuron.neuron_view(w["trace"], **a), dict(layer=0, head=0, query=1),
                    dict(layer="index", head="index", query="index")),
    "rollout": (lambda w, **a: rollout.rollout(w["trace"], **a), dict(), dict(start="count", end="count")),
    "flow": (lambda w, **a: rollout.flow(w["trace"], **a), dict(query=1),
             dict(query="index", start="count", end="count")),
    "sink_share": (lambda w, **a: sinks.sink_share(w["trace"], **a), dict(), dict(keys="heads")),
    "sqrt_d_law": (lambda w, **a: attnviz.sqrt_d_law(**a), dict(dims=(4,), n_queries=4, n_keys=4),
                   dict(dims="sizes", n_queries="count", n_keys="count", seed="seed")),
    "ablate": (lambda w, **a: attnviz.ablate(**dict(dict(loaded=w["lm"]), **a)), dict(text="the cat sat", heads=[(0, 1)]),
               dict(loaded="model", text="text", heads="head_pairs", mode="choice", target="target", top_k="count",
                    max_tokens="count")),
    "generate": (lambda w, **a: attnviz.generate(**dict(dict(loaded=w["lm"]), **a)),
                 dict(prompt="the cat sat", max_new_tokens=2),
                 dict(loaded="model", prompt="text", max_new_tokens="count", sample="flag", seed="seed", chat="flag",
                      max_tokens="count")),
    "load_model": (lambda w, **a: attnviz.load_model(**a), dict(name="tiny"),
                   dict(name="text", device="choice", dtype="choice")),
    "from_model": (lambda w, **a: attnviz.from_model(**dict(dict(model=w["hf"], tokenizer=w["tokenizer"]), **a)),
                   dict(), dict(model="hf_model", tokenizer="tokenizer", name="text")),
    "module_from_layer": (lambda w, **a: attnviz.module_from_layer(**dict(dict(loaded=w["model"]), **a)),
                          dict(layer=0), dict(loaded="model", layer="index")),
    "attention_inputs": (lambda w, **a: attnviz.attention_inputs(**dict(dict(loaded=w["model"]), **a)),
                         dict(text="The cat sat.", layer=0),
                         dict(loaded="model", text="text", layer="index", pair="text", max_tokens="count")),
    "show trace": (lambda w, **a: attnviz.show(**dict(dict(trace=w["trace"]), **a)), dict(), dict(trace="trace")),
    "show heads": (lambda w, **a: attnviz.show(w["trace"], "heads", **a), dict(),
                   dict(stage="choice", colours="choice")),
    "show scaling": (lambda w, **a: attnviz.show(w["trace"], "scaling", **a), dict(),
                     dict(scale="scale", all_heads="flag")),
    "show masks": (lambda w, **a: attnviz.show(w["trace"], "masks", **a), dict(), dict(unmasked="trace")),
    "show headstats": (lambda w, **a: attnviz.show(w["trace"], "headstats", **a), dict(),
                       dict(statistic="choice", special="tokens", view="choice")),
    "show rollout": (lambda w, **a: attnviz.show(w["trace"], "rollout", **a), dict(),
                     dict(start="count", end="count")),
    "show neuron": (lambda w, **a: attnviz.show(w["trace"], "neuron", **a), dict(), dict(query="index")),
    "show words": (lambda w, **a: attnviz.show(w["trace"], "words", **a), dict(),
                   dict(scheme="choice", view="choice")),
    "show pairs": (lambda w, **a: attnviz.show(w["pair"], "pairs", **a), dict(), dict(view="choice")),
    "show compare": (lambda w, **a: attnviz.show(w["trace"], "compare", **a), dict(other=None),
                     dict(other="trace", other_layer="layer_or_none", measure="choice", view="choice")),
    "show geometry": (lambda w, **a: attnviz.show(w["trace"], "geometry", **a), dict(),
                      dict(method="choice", colour="choice", normalised="flag")),
    "head_geometry": (lambda w, **a: geometry.head_geometry(w["trace"], **a), dict(layer=0, head=0),
                      dict(layer="index", head="index", method="choice", normalised="flag", most="most",
                           seed="seed")),
    "layer_geometry": (lambda w, **a: geometry.layer_geometry(w["trace"], **a), dict(layer=0),
                       dict(layer="index", most="most", seed="seed")),
    "points_geometry": (lambda w, **a: geometry.points_geometry(**a), dict(q=np.ones((3, 4)), k=np.ones((3, 4))),
                        dict(q="array", k="array", mask="array", scale="scale", method="choice", normalised="flag",
                             most="most", seed="seed")),
    "layer_csv": (lambda w, **a: export.layer_csv(w["trace"], **a), dict(layer=0), dict(layer="index")),
    "layer_npz": (lambda w, **a: export.layer_npz(w["trace"], **a), dict(layer=0), dict(layer="index")),
    "provenance_record": (lambda w, **a: export.provenance_record(w["trace"], **a), dict(),
                          dict(text="text", pair="text")),
    "profile": (lambda w, **a: attnviz.profile(**dict(dict(model=w["model"]), **a)),
                dict(corpus=["the cat sat."], max_shards=0),
                dict(model="model", corpus="corpus", out="path", column="text", engine="choice", progress="callable",
                     max_shards="count", limits="limits", workers="count", max_tokens="count", shard_size="count",
                     batch="count", batch_tokens="count",
                     bins="count", top="count", intervals="count", per_interval="count", example_keys="count",
                     seed="seed", distances="flag", qk_samples="count", qk_per_text="count", qk_dtype="choice", distance_rows="count",
                     part="choice")),
    "open_profile": (lambda w, **a: attnviz.open_profile(**a), dict(folder="x"), dict(folder="path")),
}  # fmt: skip

CASES = [(entry, arg) for entry, (_, _, kinds) in ENTRIES.items() for arg in kinds]


def refused(world, entry: str, arg: str, value) -> Exception:
    call, good, _ = ENTRIES[entry]
    with pytest.raises(attnviz.AttnvizError) as info:
        call(world, **dict(good, **{arg: value}))
    return info.value


@pytest.mark.parametrize("entry", ENTRIES)
def test_each_entry_point_takes_its_good_call(world, entry, tmp_path):
    call, good, _ = ENTRIES[entry]
    if entry.endswith("load_npz"):  # its good call needs a file; the file's own tests are in test_trace_file.py
        good = dict(data=export.trace_npz(world["trace"]))
    if entry == "load_model":  # a folder of a model (the tiny GPT-2), loaded once more
        good = dict(name=world["lm_dir"])
    if entry == "open_profile":  # a profile of one short text, saved
        attnviz.profile(world["model"], ["the cat sat."], out=tmp_path, distances=False)
        good = dict(folder=tmp_path)
    call(world, **good)


@pytest.mark.parametrize(("entry", "arg"), CASES, ids=[f"{e}-{a}" for e, a in CASES])
@settings(max_examples=12, deadline=1000, suppress_health_check=[HealthCheck.function_scoped_fixture], derandomize=True)
@given(data=st.data())
def test_a_hostile_value_is_refused_naming_the_argument(world, entry, arg, data):
    value = data.draw(hostile(ENTRIES[entry][2][arg]), label=arg)
    error = refused(world, entry, arg, value)
    assert arg.split("_")[0] in str(error) or getattr(error, "argument", "").startswith(arg), (entry, arg, str(error))


@pytest.mark.parametrize("entry", ENTRIES)
def test_an_unknown_keyword_is_a_type_error_naming_it(world, entry):
    call, good, _ = ENTRIES[entry]
    with pytest.raises(attnviz.ArgumentTypeError, match="no_such_option"):
        call(world, **dict(good, no_such_option=1))


def test_wrong_types_are_said_as_wrong_types(world):
    """`attnviz.trace(model, 123)` says the text must be a str (it used to say the text was empty)."""
    with pytest.raises(attnviz.ArgumentTypeError, match="text must be a str, not int"):
        attnviz.trace(world["model"], 123)
    with pytest.raises(TypeError, match="max_tokens must be a whole number"):  # still a TypeError for old callers
        attnviz.trace(world["model"], "a b", max_tokens="5")
    with pytest.raises(ValueError, match="scale must be a finite non-zero number of magnitude at most 10000; got nan"):
        attnviz.trace(world["model"], "a b", scale=math.nan)


def test_sizes_past_the_documented_limits_never_reach_the_allocator():
    for call, name in ((lambda: attnviz.MultiHeadAttention(2**40, 1), "d_model"),
                       (lambda: attnviz.causal_mask(10**6), "n_query"),
                       (lambda: attnviz.causal_mask(checks.MAX_TOKENS, checks.MAX_TOKENS), "causal_mask"),
                       (lambda: attnviz.seeded_vectors(checks.MAX_TOKENS, checks.MAX_WIDTH), "seeded_vectors")):  # fmt: skip
        with pytest.raises(attnviz.ArgumentError, match=name):
            call()
    assert attnviz.causal_mask(3).shape == (3, 3)  # and a small one is still made


def test_every_public_function_is_called_here():
    """A function added to attnviz.__all__ without an entry above fails here, and the profile's bounded settings are
    its Settings' fields (a new setting without a bound would reach the run unchecked)."""
    from dataclasses import fields

    from attnviz.checks.objects import PROFILE_SETTINGS
    from attnviz.corpus.state import Settings

    public = {name for name in attnviz.__all__ if inspect.isfunction(getattr(attnviz, name))}
    assert public - {entry.split()[0] for entry in ENTRIES} == set()
    assert set(PROFILE_SETTINGS) == {f.name for f in fields(Settings)}
