"""The scores before and after logit softcapping (Gemma 2), from attnviz.analysis.softcap."""

from __future__ import annotations

import plotly.graph_objects as go

from ..analysis.softcap import Softcap
from .common import INK, LEGEND_ABOVE, f32, finish


def softcap_curve(values: Softcap, head: int) -> go.Figure:
    """Each visible cell's score before the cap (x) against after it (y), with the line y = x the cells would sit
    on without a cap and the ceilings ±cap the tanh never crosses."""
    lo = float(min(values.before.min(initial=-values.cap), -values.cap))
    hi = float(max(values.before.max(initial=values.cap), values.cap))
    fig = go.Figure()
    fig.add_trace(
        go.Scatter(
            x=[lo, hi],
            y=[lo, hi],
            mode="lines",
            name="no cap (y = x)",
            line=dict(color="#999999", dash="dot"),
            hoverinfo="skip",
        )
    )
    for sign in (1, -1):
        fig.add_trace(
            go.Scatter(
                x=[lo, hi],
                y=[sign * values.cap] * 2,
                mode="lines",
                showlegend=sign == 1,
                name=f"±cap ({values.cap:g})",
                line=dict(color=INK, width=1),
                hoverinfo="skip",
            )
        )
    fig.add_trace(
        go.Scatter(
            x=f32(values.before),
            y=f32(values.after),
            mode="markers",
            marker=dict(size=5, color="#e66101", opacity=0.6),
            name="cells a query may see",
            hovertemplate="before %{x:.3f}<br>after %{y:.3f}<extra></extra>",
        )
    )
    fig.update_xaxes(title_text="q·k × scale, before the cap")
    fig.update_yaxes(title_text="scaled stage, after the cap")
    shown = "" if values.before.size == values.n_cells else f" ({values.before.size:,} of {values.n_cells:,} cells)"
    title = f"Head {head}: scores squeezed by the cap{shown}"
    legend = LEGEND_ABOVE | dict(y=1.02)  # between the title and the plot
    return finish(fig, "softcap_curve", height=380, top=80, title=title, legend=legend)
