"""The query-key space's legend names the two marker kinds in a neutral grey in every colouring (a legend entry
takes its trace's first colour, which for 'position' was position 0's dark purple: invisible on a dark page)."""

import numpy as np
import pytest

from attnviz.analysis.geometry import points_geometry
from attnviz.plots.geometry import query_key_space


@pytest.mark.parametrize("colour", ["position", "token"])
def test_the_legend_shows_queries_and_keys_in_grey_and_hides_nothing_else_by_them(colour):
    rng = np.random.default_rng(0)
    geo = points_geometry(rng.normal(size=(6, 4)), rng.normal(size=(6, 4)))
    fig = query_key_space(geo, ["a", "b", "c", "a", "b", "c"], colour=colour)
    kinds = [t for t in fig.data if t.showlegend is not False and t.name in ("queries", "keys")]
    assert sorted(t.name for t in kinds) == ["keys", "queries"]
    assert all(t.marker.color == "#888" for t in kinds)
    drawn = [t for t in fig.data if t.x is not None and len(t.x) and t.x[0] is not None]
    assert sum(len(t.x) for t in drawn) == 12  # every point still drawn once
    if colour == "position":  # clicking a kind's legend entry hides that kind's points (one legend group)
        assert {t.legendgroup for t in drawn} == {t.legendgroup for t in kinds}
