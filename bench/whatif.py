"""What-if variants of the dashboard for the browser timing benches (evidence for fixes outside bench/).

Each variant is a patched COPY of the checkout under bench/out/variant/<name>/ (the real files are never
touched), served by its own `streamlit run` next to the unpatched app, with rounds alternating between
them. A patch whose target text is gone (the code changed) is skipped and reported, never guessed.
"""

from __future__ import annotations

import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VARIANTS = ROOT / "bench" / "out" / "variant"
COPY = ("app.py", "attnviz", "pages", ".streamlit")
# The overview / head-grid redraw variants measured earlier are now part of the app (docs/benchmarks.md).

# (file, old text, new text)
GC_FREEZE = (
    "attnviz/ui.py",
    '    print(f"attnviz: loaded model {name!r} in',
    "    import gc\n\n    gc.collect()\n    gc.freeze()  # imports + model: never garbage; later full collections skip them\n"
    '    print(f"attnviz: loaded model {name!r} in',
)

WHATIF = {
    "gc.freeze() after the model load": dict(
        patches=[GC_FREEZE],
        why="attnviz/ui.py get_model: gc.collect(); gc.freeze() once the model is loaded, so Streamlit's full "
        "collection after every run only walks objects made since (the ~425k objects of torch, transformers, "
        "plotly, streamlit and the model are permanent)",
    ),
    "postScriptGC off (app unchanged)": dict(
        patches=[],
        args=("--runner.postScriptGC", "false"),
        why="Streamlit's full gc.collect(2) after every run (~0.2 s holding the GIL with ~425k objects) switched off",
    ),
}


def build(name: str) -> tuple[Path, list[str]]:
    """Copy the checkout to bench/out/variant/<slug> and apply the patches; returns (root, patches not applied)."""
    spec = WHATIF[name]
    slug = "".join(c if c.isalnum() else "-" for c in name).strip("-")[:60]
    dest = VARIANTS / slug
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    for item in COPY:
        src = ROOT / item
        if src.is_dir():
            shutil.copytree(src, dest / item, ignore=shutil.ignore_patterns("__pycache__"))
        elif src.exists():
            shutil.copy2(src, dest / item)
    missing = []
    for rel, old, new in spec["patches"]:
        path = dest / rel
        text = path.read_text()
        if old not in text:
            missing.append(f"{rel}: {old.splitlines()[0][:60]}…")
            continue
        path.write_text(text.replace(old, new, 1))
    return dest, missing
