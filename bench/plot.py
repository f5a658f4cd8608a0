"""The scaling figure: matplotlib PNG when the bench environment has it, else a small hand-written SVG."""

from __future__ import annotations

from pathlib import Path

MB = 1024 * 1024


def _series(scaling: dict):
    rows = scaling["rows"]
    ns = [r["n_tokens"] for r in rows]
    t_tr = [r["trace"]["median"] * 1e3 for r in rows]
    t_eg = [r["eager"]["median"] * 1e3 for r in rows]
    err_tr = [[m - r["trace"]["min"] * 1e3 for m, r in zip(t_tr, rows)], [r["trace"]["max"] * 1e3 - m for m, r in zip(t_tr, rows)]]
    mem = {
        "trace arrays kept": [r["trace_bytes"] / MB for r in rows],
        "peak RSS growth, attnviz.trace": [r["mem_trace"]["peak_growth"] / MB for r in rows if "mem_trace" in r],
        "peak RSS growth, eager forward": [r["mem_eager"]["peak_growth"] / MB for r in rows if "mem_eager" in r],
    }
    mem = {k: v for k, v in mem.items() if len(v) == len(ns)}
    return ns, t_tr, t_eg, err_tr, mem


def write(scaling: dict, stem: Path) -> Path:
    """Write stem.png (matplotlib) or stem.svg; return the path written."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return _svg(scaling, stem.with_suffix(".svg"))
    ns, t_tr, t_eg, err_tr, mem = _series(scaling)
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4.2))
    a.errorbar(ns, t_tr, yerr=err_tr, marker="o", capsize=3, label="attnviz.trace (all 4 stages, median, min-max)")
    a.plot(ns, t_eg, marker="s", label="eager forward, output_attentions=True")
    fit = scaling.get("fit")
    if fit:
        import numpy as np

        xs = np.geomspace(min(ns), max(ns), 60)
        a.plot(xs, (fit["a"] + fit["b"] * xs + fit["c"] * xs**2) * 1e3, ":", color="grey", label="fit a + bT + cT²")
        if fit.get("crossover_tokens") and min(ns) < fit["crossover_tokens"] < 4 * max(ns):
            a.axvline(fit["crossover_tokens"], color="grey", lw=0.8)
            a.text(fit["crossover_tokens"], a.get_ylim()[0] * 1.1, f" cT² = bT at T≈{fit['crossover_tokens']:.0f}", fontsize=8)
    a.set(xscale="log", yscale="log", xlabel="tokens", ylabel="ms per sentence", title="Trace time vs length")
    a.set_xticks(ns, [str(n) for n in ns])
    a.legend(fontsize=8)
    for label, ys in mem.items():
        b.plot(ns, ys, marker="o", label=label)
    b.set(xscale="log", yscale="log", xlabel="tokens", ylabel="MB", title="Memory vs length")
    b.set_xticks(ns, [str(n) for n in ns])
    b.legend(fontsize=8)
    fig.tight_layout()
    path = stem.with_suffix(".png")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _svg(scaling: dict, path: Path) -> Path:
    """A dependency-free log-log line chart of the trace and eager medians."""
    import math

    ns, t_tr, t_eg, _, _ = _series(scaling)
    W, H, P = 640, 360, 50
    lx0, lx1 = math.log10(min(ns)), math.log10(max(ns))
    ys = t_tr + t_eg
    ly0, ly1 = math.log10(min(ys) / 1.5), math.log10(max(ys) * 1.5)
    X = lambda n: P + (math.log10(n) - lx0) / (lx1 - lx0) * (W - 2 * P)  # noqa: E731
    Y = lambda v: H - P - (math.log10(v) - ly0) / (ly1 - ly0) * (H - 2 * P)  # noqa: E731
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="11">',
           f'<rect width="{W}" height="{H}" fill="white"/>',
           f'<text x="{W / 2}" y="20" text-anchor="middle" font-size="14">Trace time vs length (ms, log-log)</text>']
    for n in ns:
        out.append(f'<text x="{X(n):.1f}" y="{H - P + 16}" text-anchor="middle">{n}</text>')
    for name, vals, colour in (("attnviz.trace", t_tr, "#1f77b4"), ("eager", t_eg, "#ff7f0e")):
        pts = " ".join(f"{X(n):.1f},{Y(v):.1f}" for n, v in zip(ns, vals))
        out.append(f'<polyline points="{pts}" fill="none" stroke="{colour}" stroke-width="2"/>')
        for n, v in zip(ns, vals):
            out.append(f'<circle cx="{X(n):.1f}" cy="{Y(v):.1f}" r="3" fill="{colour}"><title>{name} {n}: {v:.1f} ms</title></circle>')
        out.append(f'<text x="{X(ns[-1]) - 5:.1f}" y="{Y(vals[-1]) - 8:.1f}" text-anchor="end" fill="{colour}">{name}</text>')
    out.append("</svg>")
    path.write_text("\n".join(out))
    return path
