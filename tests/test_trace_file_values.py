"""Values in a saved trace file: `export.trace_npz` writes each layer's values and ||v W_O|| table when the trace
keeps them, `trace_file` reads them back within bounds, so a reopened file draws value-weighted attention; files
whose values do not fit are refused in attnviz's words. The Export page reopens an upload value-weighted."""

from __future__ import annotations

import io

import numpy as np
import pytest
from helpers import figures, make_trace, npz_members, npz_of, run_page, z_arrays

import attnviz
from attnviz import export
from attnviz.analysis.values import value_share
from attnviz.errors import InputError
from attnviz.trace import file as trace_file

TEXT = "the cat sat on the mat because it was tired"


@pytest.fixture(scope="module")
def llama_trace(tiny_llama):
    return attnviz.trace(tiny_llama, TEXT)  # grouped queries: 8 query heads share 2 key/value heads


def test_values_and_output_norms_travel_in_the_file_and_come_back(llama_trace):
    tr = llama_trace
    data = export.trace_npz(tr, text=TEXT)
    with np.load(io.BytesIO(data)) as z:
        saved = {k: z[k] for k in z.files}
    back = export.load_npz(data)
    assert back.has("values")
    for layer in range(tr.n_layer):
        v, written = saved[f"values_{layer}"], saved[f"output_norms_{layer}"]
        assert v.shape[0] == 2 and written.shape == (tr.n_head, tr.n_keys)  # key/value heads as kept, not expanded
        np.testing.assert_array_equal(back.output_norms(layer), tr.output_norms(layer))
        for head in range(tr.n_head):  # each query head reads its key/value head's values, as the model shares them
            np.testing.assert_array_equal(back.values(layer, head), tr.values(layer, head))
        # value-weighted attention of the reopened trace, against numpy on the original's weights and the file's norms
        norms = tr.stages(layer).weights.astype(np.float64) * written[:, None, :]
        want = norms / norms.sum(-1, keepdims=True)
        np.testing.assert_allclose(value_share(back, layer), want, atol=1e-6)
        np.testing.assert_allclose(value_share(back, layer), value_share(tr, layer), atol=1e-6)


def test_a_trace_without_values_is_saved_without_them_and_says_why_when_reopened():
    data = export.trace_npz(make_trace(["a", "b", "c"], n_layer=2, n_head=2))
    assert not any(k.startswith(("values", "output_norms")) for k in npz_members(data))
    back = export.load_npz(data)
    assert not back.has("values") and "saved without value vectors" in back.why_not("values")


def _values(n_layer=2, n_head=3, kv=3, keys=5, width=4, norm=1.0):
    out = {}
    for i in range(n_layer):
        out[f"values_{i}"] = np.ones((kv, keys, width), np.float32)
        out[f"output_norms_{i}"] = np.full((n_head, keys), norm, np.float32)
    return out


BAD = {  # name -> (members to add to a valid 2-layer, 3-head, 5-token file, words the message must hold)
    "values of one layer only": ({k: v for k, v in _values().items() if k.endswith("_0")}, "some layers only"),
    "negative output norms": (_values(norm=-1.0), "negative"),
    "NaN output norms": (_values(norm=float("nan")), "NaN"),
    "values of other keys": (_values(keys=4), "values_0 array does not fit"),
    "key/value heads that do not divide the heads": (_values(kv=2), "values_0 array does not fit"),
    "output norms of other heads": ({**_values(), "output_norms_1": np.ones((2, 5), np.float32)}, "does not fit"),
    "values of a layer the file lacks": ({**_values(), "values_9": np.ones((3, 5, 4), np.float32)}, "does not fit"),
    "values of rank 2": ({**_values(), "values_1": np.ones((5, 4), np.float32)}, "values_1 array has 2 axes"),
}


@pytest.mark.parametrize("name", list(BAD))
def test_values_that_do_not_fit_are_refused_with_a_clear_message(name):
    members, words = BAD[name]
    data = npz_of({**npz_members(export.trace_npz(make_trace(["a", "b", "c", "d", "e"]))), **members})
    with pytest.raises(InputError) as e:
        trace_file.open_npz(data)
    assert words in str(e.value) and "pickle" not in str(e.value).lower()


def test_values_in_a_file_of_weights_only_are_refused():
    data = npz_of({**npz_members(export.trace_npz(make_trace(list("abcde"), only_weights=True))), **_values()})
    with pytest.raises(InputError, match="values without scores"):
        trace_file.open_npz(data)


def test_the_export_page_reopens_an_upload_value_weighted(bundled):
    other = attnviz.trace(bundled, "A dog ran away.")
    at = run_page("app_pages/export.py", text="The cat sat on the mat.")
    at.file_uploader(key="ex_upload").upload("t.npz", export.trace_npz(other)).run()
    picker = next(w for w in at.get("button_group") if w.proto.label == "Stage of the saved trace")
    assert list(picker.options)[-1] == "value-weighted"
    picker.set_value("value-weighted").run()
    assert not at.exception, [e.value for e in at.exception]
    grid = figures(at)["saved_grid"]
    assert grid["layout"]["meta"]["stage"] == "value-weighted"
    want = value_share(other, 0)
    for h, z in enumerate(z_arrays(grid)):
        np.testing.assert_allclose(z, want[h], atol=1e-6)
