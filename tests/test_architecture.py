"""The shape of the code, checked: no import cycles, one importer per heavy dependency, no private names
crossing modules, files and functions that fit on a screen."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "attnviz"


def _modules() -> dict[str, Path]:
    out = {}
    for f in PACKAGE.rglob("*.py"):
        parts = f.relative_to(ROOT).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = f
    return out


def _imports(mod: str, path: Path, mods: dict) -> set[str]:
    """attnviz modules that `mod` imports (relative imports resolved; `from . import x` names module x)."""
    pkg = mod if path.name == "__init__.py" else mod.rsplit(".", 1)[0]
    deps = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = pkg.split(".")[: len(pkg.split(".")) - (node.level - 1)]
            target = ".".join(base + ([node.module] if node.module else []))
            deps |= {f"{target}.{a.name}" if f"{target}.{a.name}" in mods else target for a in node.names}
    return deps - {mod}


def test_no_import_cycle_inside_the_package():
    mods = _modules()
    graph = {m: _imports(m, p, mods) for m, p in mods.items()}
    cycles = []

    def visit(m, stack):
        for d in graph.get(m, ()):
            if d in stack:
                cycles.append(stack[stack.index(d) :] + [d])
            elif len(stack) < 30:
                visit(d, stack + [d])

    for m in graph:
        visit(m, [m])
    assert not cycles, cycles[0]


def test_no_module_imports_by_a_string():
    """importlib.import_module / __import__ would hide an import (and a cycle) from the test above."""
    calls = [
        f"{path.relative_to(ROOT)}:{node.lineno}"
        for path in PACKAGE.rglob("*.py")
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Call)
        and (getattr(node.func, "attr", None) == "import_module" or getattr(node.func, "id", None) == "__import__")
    ]
    assert not calls, calls


def _imported_names(path: Path):
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            yield from ((a.name, None) for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            yield from ((node.module or "", a.name) for a in node.names)


def test_transformers_only_in_hf_and_streamlit_only_in_ui():
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(PACKAGE).as_posix()
        top = {mod.split(".")[0] for mod, _ in _imported_names(path)}
        if not rel.startswith("hf/"):
            assert "transformers" not in top, rel
        if not rel.startswith("ui/"):
            assert "streamlit" not in top, rel


def test_no_private_name_is_imported_from_another_module():
    files = [
        *PACKAGE.rglob("*.py"),
        *(ROOT / "app_pages").glob("*.py"),
        ROOT / "app.py",
        *(ROOT / "bench").glob("*.py"),
    ]
    leaks = [
        f"{path.relative_to(ROOT)}: {mod}.{name}"
        for path in files
        for mod, name in _imported_names(path)
        if name and name.startswith("_") and not name.startswith("__")
    ]
    assert not leaks, leaks


def test_files_and_functions_fit_on_a_screen():
    too_long = []
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(PACKAGE).as_posix()
        if len(path.read_text().splitlines()) > 430:
            too_long.append(f"{rel} has {len(path.read_text().splitlines())} lines")
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef) and not rel.startswith("plots/"):  # figure builders may be longer
                if node.end_lineno - node.lineno + 1 > 50:
                    too_long.append(f"{rel}:{node.name} has {node.end_lineno - node.lineno + 1} lines")
    assert not too_long, too_long


#: The only modules that may name a trace's or a source's kind: the trace itself, the loader, our module's tracer
#: and the selection (ui/state.py); the rest ask for facts (`has`, `single_layer`, `applies_padding`, `layer_label`).
KIND_FLAGS = ("weights_only", "is_module", "pretrained", "captures", "reproduced")
KIND_OWNERS = ("attnviz/trace/record.py", "attnviz/trace/layers.py", "attnviz/trace/reads.py", "attnviz/trace/window_cache.py",
               "attnviz/hf/load.py", "attnviz/hf/probe.py", "attnviz/module/tracing.py", "attnviz/ui/state.py")  # fmt: skip


def _identifiers(tree) -> set[str]:
    """Names used as attributes, variables, parameters and keyword arguments (not strings, not test names)."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            out.add(node.attr)
        elif isinstance(node, ast.Name):
            out.add(node.id)
        elif isinstance(node, (ast.arg, ast.keyword)) and node.arg:
            out.add(node.arg)
    return out


def test_no_caller_tests_what_kind_of_trace_it_holds():
    """A page or analysis asks a trace what it can give (`trace.has(stage)`, `trace.why_not(stage)`); it never tests
    a kind flag, so a new kind of trace or source cannot crash a page that forgot one."""
    files = [*PACKAGE.rglob("*.py"), *(ROOT / "app_pages").glob("*.py"), ROOT / "app.py", *(ROOT / "bench").glob("*.py"),
             *(ROOT / "tests").rglob("*.py")]  # fmt: skip
    leaks = [
        f"{path.relative_to(ROOT)}: {name}"
        for path in files
        if path.relative_to(ROOT).as_posix() not in KIND_OWNERS
        for name in sorted(_identifiers(ast.parse(path.read_text())) & set(KIND_FLAGS))
    ]
    assert not leaks, leaks


def _kind_tests(tree) -> list[int]:
    """Lines that compare a provenance's kind (`x.provenance.kind == "module"`)."""
    return [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Compare)
        for side in (node.left, *node.comparators)
        if isinstance(side, ast.Attribute) and side.attr == "kind"
        and isinstance(side.value, ast.Attribute) and side.value.attr == "provenance"
    ]  # fmt: skip


def test_no_page_or_reader_tests_the_provenance_kind():
    """Pages, figures and analyses ask a trace's provenance for facts (`single_layer`, `layer_label`, `short_label`)
    rather than comparing its kind, so a new kind of source cannot fall through a page's if/else."""
    files = [
        *PACKAGE.rglob("*.py"),
        *(ROOT / "app_pages").glob("*.py"),
        ROOT / "app.py",
        *(ROOT / "bench").glob("*.py"),
    ]
    leaks = [
        f"{path.relative_to(ROOT)}:{line}"
        for path in files
        if path.relative_to(ROOT).as_posix() not in KIND_OWNERS
        for line in _kind_tests(ast.parse(path.read_text()))
    ]
    assert not leaks, leaks


def test_no_class_is_longer_than_150_lines():
    """A class that does one thing fits on a few screens; AttentionTrace is a record, its layers and its reads are
    their own modules, its window cache lives beside it."""
    files = [*PACKAGE.rglob("*.py"), *(ROOT / "app_pages").glob("*.py"), *(ROOT / "bench").glob("*.py")]
    too_long = [
        f"{path.relative_to(ROOT)}:{node.name} has {node.end_lineno - node.lineno + 1} lines"
        for path in files
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.ClassDef) and node.end_lineno - node.lineno + 1 > 150
    ]
    assert not too_long, too_long


def _figure_builders() -> set[str]:
    """'module.function' of every public function of attnviz.plots written to return a Figure."""
    found = set()
    for path in (PACKAGE / "plots").glob("*.py"):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.FunctionDef) and not node.name.startswith("_") and node.returns is not None:
                if "Figure" in ast.unparse(node.returns):
                    found.add(f"{path.stem}.{node.name}")
    return found


def _plots_aliases(tree) -> dict[str, str]:
    """{name in the page: attnviz.plots module it names} ('hm' -> 'heatmaps'), and names imported from one."""
    out = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "attnviz.plots":
            out |= {a.asname or a.name: a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("attnviz.plots."):
            module = node.module.rsplit(".", 1)[1]
            out |= {a.asname or a.name: f"{module}.{a.name}" for a in node.names}
    return out


def test_pages_draw_their_figures_through_attnviz_figures():
    """A page with a figures function calls it and builds no figure itself, so the dashboard and attnviz.show draw
    one composition: the page lays out what figures.<page>(trace, **controls) returns."""
    import attnviz.figures

    builders = _figure_builders()
    assert {"heatmaps.head_grid", "headstats.weights_matrix", "masks.leak_bars"} <= builders  # the scan finds them
    wrong = []
    for page in attnviz.figures.PAGES:
        tree = ast.parse((ROOT / "app_pages" / f"{page}.py").read_text())
        aliases = _plots_aliases(tree)
        calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call)]
        names = {ast.unparse(c.func) for c in calls}
        if f"figures.{page}" not in names:
            wrong.append(f"{page}: never calls figures.{page}")
        for call in calls:
            func = ast.unparse(call.func)
            alias, _, attr = func.partition(".")
            target = aliases.get(alias)
            built = target if not attr else f"{target}.{attr}" if target and "." not in target else None
            if built in builders:
                wrong.append(f"{page}:{call.lineno} builds a figure itself ({func})")
    assert not wrong, wrong


def test_every_test_module_has_a_name_of_its_own():
    """pytest imports test files without packages by their base name: two of one name in different folders stop the
    whole run with an 'import file mismatch' error (a browser test once shared its name with an AppTest)."""
    seen: dict[str, list[str]] = {}
    for path in (ROOT / "tests").rglob("test_*.py"):
        seen.setdefault(path.name, []).append(str(path.relative_to(ROOT)))
    assert {name: paths for name, paths in seen.items() if len(paths) > 1} == {}


def test_the_package_root_holds_at_most_8_modules():
    """New parts go into the package that holds their idea (trace/, hf/, analysis/, plots/, figures/, ui/, corpus/...),
    not flat at the root (issue 27: the root had grown to 21 modules)."""
    modules = sorted(p.name for p in (ROOT / "attnviz").glob("*.py") if p.name != "__init__.py")
    assert len(modules) <= 8, modules
