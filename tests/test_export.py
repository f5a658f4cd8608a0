"""Downloads (attnviz.export) and the module/pretrained parity number, on synthetic traces."""

from __future__ import annotations

import csv
import io

import numpy as np
import pytest
from helpers import make_trace

from attnviz import export
from attnviz.errors import AttnvizError, InputError
from attnviz.module.tracing import parity


def test_csv_has_one_row_per_head_query_key_with_every_stage():
    tr = make_trace(["=cmd", "the", "the", "-"], n_layer=2, n_head=3, causal=True)
    rows = list(csv.DictReader(io.StringIO(export.layer_csv(tr, 1).decode())))
    assert len(rows) == 3 * 4 * 4
    assert list(rows[0]) == [
        "layer",
        "head",
        "query",
        "query_token",
        "key",
        "key_token",
        "scores",
        "scaled",
        "masked",
        "weights",
        "may_attend",
    ]
    r = next(r for r in rows if (r["head"], r["query"], r["key"]) == ("2", "3", "1"))
    assert float(r["weights"]) == pytest.approx(tr.weights[1, 2, 3, 1], rel=1e-6)
    assert float(r["scaled"]) == pytest.approx(tr.scaled[1, 2, 3, 1], rel=1e-6)
    assert {r["key_token"] for r in rows} == {"'=cmd", "the", "-"}, "formulas neutralised, a lone '-' kept"
    masked = [r for r in rows if r["may_attend"] == "0"]
    assert masked and all(float(r["weights"]) == 0 for r in masked)


def test_npz_round_trips_every_stage():
    tr = make_trace(["a", "b", "c"], n_layer=2, n_head=2)
    z = np.load(io.BytesIO(export.layer_npz(tr, 1)))
    assert list(z["tokens"]) == ["a", "b", "c"]
    for s in ("scores", "scaled", "masked", "weights"):
        np.testing.assert_array_equal(z[s], tr.stage(s)[1])
    assert z["mask"].dtype == bool and float(z["scale"]) == tr.scale[1]


def test_weights_only_exports_only_weights():
    tr = make_trace(["a", "b"], only_weights=True)
    assert export.layer_csv(tr, 0).decode().splitlines()[0].endswith("key_token,weights")
    assert set(np.load(io.BytesIO(export.layer_npz(tr, 0))).files) == {"tokens", "layer", "weights"}


def test_export_limits_and_names():
    tr = make_trace(["a", "b"], n_layer=1)
    with pytest.raises(AttnvizError):
        export.layer_csv(tr, 3)
    assert export.csv_ok(tr)
    assert not export.csv_ok(make_trace([str(i) for i in range(420)], n_layer=1, n_head=3))
    assert export.file_name(tr, 0, "npz") == "attnviz_synthetic_layer0.npz"


def test_parity_is_the_largest_weight_difference():
    a = make_trace(["a", "b", "c"], n_layer=1, n_head=2, seed=0)
    assert parity(a, a, 0) == 0.0
    c = make_trace(["a", "b", "c"], n_layer=3, n_head=2, seed=1)
    assert parity(a, c, 2) == pytest.approx(float(np.abs(a.weights[0] - c.weights[2]).max()))
    with pytest.raises(InputError):
        parity(a, make_trace(["a", "b"], n_layer=1, n_head=2), 0)


def test_record_rows_say_a_shared_scale_once_and_keep_differing_ones():
    from attnviz.export import record_rows

    record = {
        "model": "m", "text": "hi", "scale": [0.125, 0.125], "fill": [-1.0, -2.0],
        "options": [["causal", True], ["pair", None]], "versions": {"torch": "2.13.0"},
    }  # fmt: skip
    rows = record_rows(record)
    assert rows == {
        "model": "m", "scale": "0.125 (every layer)", "fill": "[-1.0, -2.0]",
        "options": "causal = true, pair = null", "version of torch": "2.13.0",
    }  # fmt: skip
    assert record_rows(record, full=True)["text"] == "hi"
    assert record_rows({**record, "options": []})["options"] == "none"
