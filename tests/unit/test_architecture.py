"""The shape of the code: no import cycle between modules, run-path functions that fit a screen, short modules.

These are the rules the architecture step set (docs/architecture.md, "Code rules"); each test names
what breaks them, so a change that slips one back in fails here with the module and line.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "wormhole"

RUN_PATH = ("engine.py", "execution.py", "reader_manager.py", "writer_manager.py", "monitor.py", "counters.py",
            "result.py")
"""The modules of the run path, whose every function must fit a screen."""

TRANSFORMS = "transform"
"""The transforms' package: every function of every module in it must fit a screen too."""

MAX_FUNCTION_LINES = 60
MAX_MODULE_LINES = 500


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def imports_of(path: Path, name: str, known: set[str]) -> set[str]:
    """Every wormhole module ``path`` imports, wherever the import statement is (lazy ones too)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: up from this module's package
                parts = package.split(".")
                base = ".".join([*parts[: len(parts) - node.level + 1], *filter(None, [base])])
            # ``from pkg import sub`` imports the submodule when there is one, else a name of pkg.
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
        else:
            continue
        for target in targets:
            while target and target not in known:  # ``import wormhole.x.y`` of a name: its module
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_import_cycle_between_modules() -> None:
    """Counting every import (module level, TYPE_CHECKING and lazy ones), no two modules import each
    other, directly or around a loop; a package's __init__ importing its own modules is no cycle."""
    mods = modules()
    known = set(mods)
    graph = {name: imports_of(path, name, known) for name, path in mods.items()}
    # A package's own __init__ is not a module of its own for this rule: ``wormhole.exchange`` is its
    # submodules' front door, and a submodule importing a sibling through it is the same layer.
    for name in graph:
        graph[name] = {t for t in graph[name] if not (name.startswith(f"{t}.") and mods[t].name == "__init__.py")}
    assert graph["wormhole.engine"], "the import walk found nothing: the test itself is broken"
    assert cycles(graph) == []


def test_the_monitor_knows_no_manager() -> None:
    """The monitor polls the sides through its protocols; the managers count into wormhole.counters."""
    mods = modules()
    known = set(mods)
    monitor = imports_of(mods["wormhole.monitor"], "wormhole.monitor", known)
    assert not monitor & {"wormhole.reader_manager", "wormhole.writer_manager", "wormhole.engine"}
    for manager in ("wormhole.reader_manager", "wormhole.writer_manager"):
        assert "wormhole.monitor" not in imports_of(mods[manager], manager, known)


def test_plugins_do_not_import_the_task_model() -> None:
    """Stores parse their options with wormhole.options, never wormhole.config (the task model)."""
    mods = modules()
    known = set(mods)
    offenders = [name for name, path in mods.items()
                 if name.startswith("wormhole.plugins.") and "wormhole.config" in imports_of(path, name, known)]
    assert offenders == []


def long_functions(files: list[Path]) -> list[str]:
    """Every function of ``files`` over 60 lines (docstring included), as ``path:line name (lines)``."""
    long = []
    for path in files:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                assert node.end_lineno is not None
                length = node.end_lineno - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    long.append(f"{path.relative_to(PACKAGE)}:{node.lineno} {node.name} ({length} lines)")
    return long


def test_run_path_functions_fit_a_screen() -> None:
    """Every function of the engine, the execution seam, the managers, the monitor and the counters is
    at most 60 lines (docstring included)."""
    assert long_functions([PACKAGE / file for file in RUN_PATH]) == []


def test_transform_functions_fit_a_screen() -> None:
    """Every function of every module of wormhole/transform (operators, chains, plan, push-up, the
    expression compilers) and of Spark's transforms is at most 60 lines."""
    files = sorted((PACKAGE / TRANSFORMS).rglob("*.py"))
    assert len(files) > 10, "found no transform modules: the test itself is broken"
    assert long_functions([*files, PACKAGE / "spark" / "transforms.py"]) == []


def test_no_module_over_500_lines() -> None:
    sizes = {str(p.relative_to(PACKAGE.parent)): len(p.read_text(encoding="utf-8").splitlines())
             for p in PACKAGE.rglob("*.py")}
    assert {p: n for p, n in sizes.items() if n > MAX_MODULE_LINES} == {}
