"""The scaling figure: matplotlib PNG when the bench environment has it, else a small hand-written SVG."""

from __future__ import annotations

from pathlib import Path

MB = 1024 * 1024


def _series(scaling: dict):
    """Times in ms: 1-thread CPU time when measured (steady on a shared machine), else wall time."""
    rows = scaling["rows"]
    ns = [r["n_tokens"] for r in rows]
    key_t, key_e = ("trace_cpu1", "eager_cpu1") if all("trace_cpu1" in r for r in rows) else ("trace", "eager")
    t_tr = [r[key_t]["median"] * 1e3 for r in rows]
    t_eg = [r[key_e]["median"] * 1e3 for r in rows]
    err_tr = [
        [m - r[key_t]["min"] * 1e3 for m, r in zip(t_tr, rows)],
        [r[key_t]["max"] * 1e3 - m for m, r in zip(t_tr, rows)],
    ]
    mem = {
        "trace arrays kept": [r["trace_bytes"] / MB for r in rows],
        "peak RSS growth, attnviz.trace": [r["mem_trace"]["peak_growth"] / MB for r in rows if "mem_trace" in r],
        "peak RSS growth, eager forward": [r["mem_eager"]["peak_growth"] / MB for r in rows if "mem_eager" in r],
    }
    mem = {k: v for k, v in mem.items() if len(v) == len(ns)}
    what = "1 thread, CPU time" if key_t == "trace_cpu1" else "wall time"
    return ns, t_tr, t_eg, err_tr, mem, what


def write(scaling: dict, stem: Path) -> Path:
    """Write stem.png (matplotlib) or stem.svg; return the path written."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.ticker import NullFormatter
    except ImportError:
        return _svg(scaling, stem.with_suffix(".svg"))
    import numpy as np

    ns, t_tr, t_eg, err_tr, mem, what = _series(scaling)
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4.2))
    a.errorbar(ns, t_tr, yerr=err_tr, marker="o", capsize=3, label="attnviz.trace, all 4 stages (median, min-max)")
    a.plot(ns, t_eg, marker="s", label="eager forward, output_attentions=True")
    fit = scaling.get("fit_cpu1") if what.startswith("1 thread") else scaling.get("fit")
    if fit:
        xs = np.geomspace(min(ns), max(ns), 60)
        a.plot(xs, (fit["a"] + fit["b"] * xs + fit["c"] * xs**2) * 1e3, ":", color="grey", label="fit a + bT + cT²")
        if fit["c"] > 0:
            a.plot(xs, fit["c"] * xs**2 * 1e3, "--", color="grey", lw=0.8, label="its cT² term alone")
    a.set(xscale="log", yscale="log", xlabel="tokens", ylabel=f"ms per sentence ({what})", title="Trace time vs length")
    b_ = [a, b]
    for label, ys in mem.items():
        b.plot(ns, ys, marker="o", label=label)
    b.set(xscale="log", yscale="log", xlabel="tokens", ylabel="MB", title="Memory vs length")
    for ax in b_:
        ax.set_xticks(ns, [str(n) for n in ns])
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3, which="both")
    fig.tight_layout()
    path = stem.with_suffix(".png")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _svg(scaling: dict, path: Path) -> Path:
    """A dependency-free log-log line chart of the trace and eager medians."""
    import math

    ns, t_tr, t_eg, _, _, what = _series(scaling)
    W, H, P = 640, 360, 50
    lx0, lx1 = math.log10(min(ns)), math.log10(max(ns))
    ys = t_tr + t_eg
    ly0, ly1 = math.log10(min(ys) / 1.5), math.log10(max(ys) * 1.5)
    X = lambda n: P + (math.log10(n) - lx0) / (lx1 - lx0) * (W - 2 * P)  # noqa: E731
    Y = lambda v: H - P - (math.log10(v) - ly0) / (ly1 - ly0) * (H - 2 * P)  # noqa: E731
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="11">',
        f'<rect width="{W}" height="{H}" fill="white"/>',
        f'<text x="{W / 2}" y="20" text-anchor="middle" font-size="14">Trace time vs length (ms, {what}, log-log)</text>',
    ]
    for n in ns:
        out.append(f'<text x="{X(n):.1f}" y="{H - P + 16}" text-anchor="middle">{n}</text>')
    for name, vals, colour in (("attnviz.trace", t_tr, "#1f77b4"), ("eager", t_eg, "#ff7f0e")):
        pts = " ".join(f"{X(n):.1f},{Y(v):.1f}" for n, v in zip(ns, vals))
        out.append(f'<polyline points="{pts}" fill="none" stroke="{colour}" stroke-width="2"/>')
        for n, v in zip(ns, vals):
            out.append(
                f'<circle cx="{X(n):.1f}" cy="{Y(v):.1f}" r="3" fill="{colour}"><title>{name} {n}: {v:.1f} ms</title></circle>'
            )
        out.append(
            f'<text x="{X(ns[-1]) - 5:.1f}" y="{Y(vals[-1]) - 8:.1f}" text-anchor="end" fill="{colour}">{name}</text>'
        )
    out.append("</svg>")
    path.write_text("\n".join(out))
    return path
