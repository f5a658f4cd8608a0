"""The joint query-key space (issue 30): PCA of 100,000 points (queries and keys of one head, head dim 64) under a
second, timed beside the cheapest independent route to the same axes (the covariance's eigenvectors)."""

from __future__ import annotations

import numpy as np

from attnviz.analysis import geometry as GE
from bench.measure import interleaved, ms, ratio

GOAL_MS = 1000.0


def pca(points: int = 100_000, d_head: int = 64, rounds: int = 5, warmup: int = 1) -> dict:
    rng = np.random.default_rng(0)
    x = (rng.normal(size=(points, d_head)) @ rng.normal(size=(d_head, d_head))).astype(np.float32)

    def eigh():
        c = np.asarray(x, np.float64) - x.mean(axis=0)
        _, vectors = np.linalg.eigh(c.T @ c)
        return c @ vectors[:, ::-1][:, :2]

    fns = {"pca": lambda: GE.pca(x), "eigh": eigh}
    got, ref = GE.pca(x)[0], eigh()
    diff = float(np.abs(np.abs(got) - np.abs(ref)).max() / np.abs(ref).max())  # equal up to each axis's sign
    t = interleaved(fns, rounds, warmup)
    out = {"points": points, "d_head": d_head, "rounds": rounds, "pca_ms": ms(t["pca"]), "eigh_ms": ms(t["eigh"])}
    return out | {"ratio": ratio(t, "pca", "eigh"), "max_rel_diff": diff, "goal_ms": GOAL_MS}
