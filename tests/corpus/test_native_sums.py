"""The profile's one-pass row sums in C (attnviz.corpus.native) and their PyTorch form (rows.pytorch_sums), each
against numpy in float64; the profile with either; and how the C library is built, kept and refused."""

from __future__ import annotations

import os
import stat

import numpy as np
import pytest
import torch

from attnviz.corpus import native, profile
from attnviz.corpus.reducers import pair_sums
from attnviz.corpus.rows import Scratch, pytorch_sums, xlogx

TEXTS = ["the cat sat on the mat .", "a dog ran away , the dog was tired .", "hello world", "the mat the mat the mat"]

TINY = np.finfo(np.float32).tiny


def window(rng, groups, heads, queries, keys, feature_groups, n_features=12, norms=True):
    """Rows of weights with hidden keys (exact zeros), a row that attends nothing, and 0/1 and integer features."""
    scores = rng.normal(0, 3, (groups, heads, queries, keys))
    hidden = np.zeros(scores.shape, bool)
    hidden[..., keys // 2 :] = rng.random((groups, 1, queries, keys - keys // 2)) < 0.3  # a mask, shared by heads
    scores[hidden] = -np.inf
    w = np.exp(scores - scores.max(-1, keepdims=True))
    w /= w.sum(-1, keepdims=True)
    w[0, 0, 0] = 0.0  # a query that may attend nothing
    f = rng.integers(0, 2, (feature_groups, queries, keys, n_features)).astype(np.float32)
    q, k = np.arange(queries)[:, None], np.arange(keys)[None, :]
    f[..., 0] = np.abs(q - k)  # a distance
    f[..., 1], f[..., 2] = k == 0, k == q - 1  # a cell a row (read as a list of keys, not a span)
    f[..., 3] = rng.random((feature_groups, queries, keys)) < 0.05  # a few cells
    f[..., 4] = k == keys - 1  # a span of one key at the end
    if not norms:
        return w.astype(np.float32), f, None
    n = rng.gamma(2.0, 1.0, (groups, heads, keys)).astype(np.float32)
    n[0, 1, 0] = 0.0  # a value of norm 0
    return w.astype(np.float32), f, n


def numpy_sums(w, f, n) -> dict:
    w, f = w.astype(np.float64), f.astype(np.float64)
    groups = np.arange(w.shape[0]) % f.shape[0]
    feats = f[groups]  # [G, Q, K, F]
    wlogw = w * np.log(np.maximum(w, TINY))
    out = {"sums": np.einsum("ghqk,gqkf->ghqf", w, feats), "wlogw": wlogw.sum(-1), "top": w.max(-1)}
    if n is not None:
        n = n.astype(np.float64)[:, :, None, :]
        u = w * n
        out["usums"] = np.einsum("ghqk,gqkf->ghqf", u, feats)
        out["ulogu"] = (wlogw * n + w * n * np.log(np.maximum(n, TINY))).sum(-1)
    return out


@pytest.mark.parametrize(
    "shape",
    [(6, 4, 9, 9, 1), (6, 4, 9, 9, 6), (6, 3, 5, 40, 3), (2, 2, 7, 130, 2), (12, 2, 3, 17, 3)],
    ids=["one text", "every group its features", "a window of queries", "long rows", "texts read together"],
)
@pytest.mark.parametrize("norms", [True, False], ids=["values", "no values"])
def test_the_one_pass_sums_and_pytorchs_equal_numpy(shape, norms):
    w, f, n = window(np.random.default_rng(sum(shape)), *shape, norms=norms)
    want = numpy_sums(w, f, n)
    as_t = lambda x: None if x is None else torch.from_numpy(x)  # noqa: E731
    assert native.library() is not None  # the CI machine has a C compiler (.ci/run installs one)
    nlogn = None if n is None else xlogx(as_t(n))
    for got in (
        native.window_sums(as_t(w), as_t(f), as_t(n), nlogn),
        pytorch_sums(as_t(w), as_t(f), as_t(n), Scratch()),
    ):
        assert set(got) == set(want)
        for k, v in want.items():
            np.testing.assert_allclose(got[k].double().numpy(), v, rtol=2e-6, atol=2e-6, err_msg=k)


@pytest.mark.parametrize("shape", [(7, 1, 5), (24, 6, 33), (9, 2, 300)], ids=["one row", "rows", "long rows"])
def test_the_head_pairs_sums_in_c_and_pytorchs_equal_numpy(shape):
    rng = np.random.default_rng(shape[2])
    p = rng.dirichlet(np.full(shape[2], 0.3), shape[:2]).astype(np.float32)  # many weights near 0
    p[0, 0, shape[2] // 2 :] = 0.0  # keys a row cannot see
    s = p[:, None].astype(np.float64) + p[None, :]
    want = (s * np.log(np.maximum(s, TINY))).sum((-1, -2))  # [a, b]
    upper = np.triu_indices(shape[0], 1)
    for got in (native.pair_sums(torch.from_numpy(p)), pair_sums(torch.from_numpy(p), 1 << 12)):
        np.testing.assert_allclose(got.numpy()[upper], want[upper], rtol=2e-6, atol=2e-6)
    assert (native.pair_sums(torch.from_numpy(p)).numpy()[np.tril_indices(shape[0])] == 0).all()


def test_a_profile_is_the_same_with_either_sums(monkeypatch):
    import attnviz

    loaded = attnviz.load_model()  # the bundled BERT-style model: special tokens, punctuation, repeated tokens
    native.library.cache_clear()
    with_c = profile(loaded, TEXTS * 3, max_tokens=64)
    monkeypatch.setenv("ATTNVIZ_NATIVE", "0")
    native.library.cache_clear()
    assert native.library() is None
    without = profile(loaded, TEXTS * 3, max_tokens=64)
    native.library.cache_clear()
    for k, v in with_c.stats.items():
        np.testing.assert_allclose(without.stats[k], v, rtol=1e-6, atol=1e-7, err_msg=k)
    assert (with_c.histogram == without.histogram).all()
    assert with_c.examples == without.examples
    np.testing.assert_allclose(without.divergence, with_c.divergence, rtol=1e-6, atol=1e-7)


def test_the_library_is_built_once_into_a_folder_of_its_own(tmp_path, monkeypatch):
    monkeypatch.setenv("ATTNVIZ_NATIVE_CACHE", str(tmp_path / "cache"))
    native.library.cache_clear()
    try:
        assert native.library() is not None
        built = list((tmp_path / "cache").glob("profile_sums-*.so"))
        assert len(built) == 1 and not built[0].stat().st_mode & 0o022
        stamp = built[0].stat().st_mtime_ns
        native.library.cache_clear()
        assert native.library() is not None and built[0].stat().st_mtime_ns == stamp  # loaded, not built again
        (tmp_path / "cache").chmod(0o777)  # a folder anyone may write: nothing is loaded from it
        native.library.cache_clear()
        assert native.library() is None
        (tmp_path / "cache").chmod(0o700)
        monkeypatch.setenv("CC", str(tmp_path / "no-such-compiler"))
        monkeypatch.setenv("ATTNVIZ_NATIVE_CACHE", str(tmp_path / "other"))
        native.library.cache_clear()
        assert native.library() is None  # no compiler: PyTorch's sums
    finally:
        native.library.cache_clear()


def test_loading_the_library_leaves_denormals_alone():
    """Linked with -ffast-math, gcc would add a constructor that flushes denormal floats to zero in the whole
    process (numpy's and torch's numbers too): it is compiled with it and linked without."""
    assert native.library() is not None
    tiny = np.float32(1e-40)
    assert tiny * np.float32(1.0) != 0 and float(torch.tensor(1e-40) * 1.0) != 0
    assert os.environ.get("ATTNVIZ_NATIVE", "1") != "0" and stat.S_ISDIR(native.cache_folder().stat().st_mode)
