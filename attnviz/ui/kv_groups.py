"""Key/value groups on the Heads grid: heads drawn by the key/value head they share, each group's Jensen-Shannon
divergence in its first panel's title and in a small table (numbers from attnviz.analysis.groups)."""

from __future__ import annotations

import streamlit as st

from ..analysis.groups import group_divergence
from ..trace import AttentionTrace
from ..trace.window_cache import memo


def grid_groups(trace: AttentionTrace, layer: int, queries=None) -> dict:
    """head_grid's `cols` and `titles` for a grouped-query layer (a row of panels per group when a group fits in a
    row), with a caption and a table of how alike each group's heads attend; {} when every head has its own keys."""
    groups = trace.kv_groups
    if all(len(g) == 1 for g in groups):
        return {}
    window = None if queries is None else tuple(queries)
    js = memo(trace, ("group_divergence", layer, window), lambda: group_divergence(trace, layer, queries=window))
    size = len(groups[0])
    titles = [""] * trace.n_head
    for g, heads in enumerate(groups):
        for i, h in enumerate(heads):
            titles[h] = f"group {g} · JS {js[g]:.3f} · head {h}" if i == 0 else f"head {h} · group {g}"
    st.caption(
        f"**Key/value groups**: {trace.n_head} query heads share {len(groups)} key/value heads, {size} per group, "
        "drawn group by group. Heads of a group read the same keys, so they differ only by their queries; **JS** is "
        "the mean Jensen-Shannon divergence between their rows (0 = they attend alike, at most ln 2 ≈ 0.693)"
        + ("" if window is None else f", over the queries shown ({window[0]}–{window[1] - 1})")
        + "."
    )
    rows = [
        {"group": g, "heads": ", ".join(map(str, heads)), "JS divergence": float(js[g])}
        for g, heads in enumerate(groups)
    ]
    with st.expander("How alike each group's heads attend"):
        st.dataframe(
            rows,
            hide_index=True,
            key="kv_groups_table",
            column_config={"JS divergence": st.column_config.NumberColumn(format="%.4f")},
        )
    return {"cols": size if 2 <= size <= 8 else 4, "titles": titles}
