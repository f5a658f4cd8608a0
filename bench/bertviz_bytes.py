"""bertviz's head_view HTML for the same attention the dashboard shows (bench environment only).

bertviz is never a project dependency: it is installed into bench/.venv-bench by the bench itself.
head_view(..., html_action="return") gives the HTML a notebook would receive; its length is what a
browser would be sent. By default it embeds every layer and head (its layer menu switches client-side);
the single-layer variant (include_layers=[layer]) is the closest like-for-like to one Heads page view.
"""

from __future__ import annotations

import time


def available() -> bool:
    try:
        import bertviz  # noqa: F401
    except ImportError:
        return False
    return True


def html_bytes(trace, layers=None) -> tuple[int, float]:
    """(UTF-8 bytes of head_view's returned HTML, seconds it took) for an AttentionTrace's weights."""
    import torch
    from bertviz import head_view

    attention = tuple(torch.from_numpy(trace.weights[i][None].copy()) for i in range(trace.n_layer))
    t = time.perf_counter()
    html = head_view(attention, list(trace.tokens), include_layers=layers, html_action="return")
    took = time.perf_counter() - t
    return len(html.data.encode("utf-8")), took


def measure(lm, sizes=(128, 512), seed_base: int = 3000) -> dict:
    """Same sentences as bench.browser.page_bytes (seed 3000 + n), traced with attnviz."""
    import attnviz

    from .text import make_text

    rows = {}
    for n in sizes:
        tr = attnviz.trace(lm, make_text(lm.tokenizer, n, seed=seed_base + n))
        all_bytes, all_s = html_bytes(tr)
        one_bytes, one_s = html_bytes(tr, layers=[0])
        rows[n] = dict(all_layers_bytes=all_bytes, all_layers_s=all_s, one_layer_bytes=one_bytes, one_layer_s=one_s)
    return rows
