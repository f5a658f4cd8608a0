"""The head finder colours a grouped-query profile by key/value head with one distinct colour per group: query heads
that share a key/value head read as one colour, neighbouring groups as different ones (not a continuous bar)."""

import numpy as np

import attnviz
from attnviz.corpus.examples import examples_from_rows
from attnviz.plots.corpus import head_finder


def _colour_at(marker, value: float) -> str:
    """The colour a stepped colorscale gives `value`, read from the figure's own scale (the segment holding it)."""
    t = (value - marker.cmin) / (marker.cmax - marker.cmin)
    scale = list(marker.colorscale)
    return next(c0 for (p0, c0), (p1, c1) in zip(scale, scale[1:]) if p0 <= t <= p1 and c0 == c1)


def test_key_value_groups_get_one_colour_each():
    rng = np.random.default_rng(0)
    stats = {"entropy": rng.random((2, 8)), "sink": rng.random((2, 8))}
    prof = attnviz.HeadProfile(
        stats, np.zeros((2, 8, 20), int), None, examples_from_rows([]), {}, {"kv_groups": 2}
    )  # 4 kv heads
    marker = head_finder(prof, "entropy", "sink", "kv_group").data[0].marker
    colours = [_colour_at(marker, v) for v in marker.color]
    group = [h // 2 for _ in range(2) for h in range(8)]
    by_group = {g: {c for c, gg in zip(colours, group) if gg == g} for g in set(group)}
    assert all(len(c) == 1 for c in by_group.values())  # one colour per group, in every layer
    assert len({next(iter(c)) for c in by_group.values()}) == 4  # four groups, four colours
    assert list(marker.colorbar.tickvals) == [0, 1, 2, 3]


def test_statistics_keep_a_continuous_scale():
    rng = np.random.default_rng(1)
    prof = attnviz.HeadProfile({"entropy": rng.random((1, 4)), "sink": rng.random((1, 4))}, np.zeros((1, 4, 20), int),
                               None, examples_from_rows([]), {}, {"kv_groups": 1})  # fmt: skip
    marker = head_finder(prof, "entropy", "sink", "sink").data[0].marker
    assert marker.cmin is None and len(marker.colorscale) > 4  # Viridis, not steps
