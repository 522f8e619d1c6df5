"""The shape of the code: no import cycle between modules, run-path functions that fit a screen, short modules.

These are the rules the architecture step set (docs/architecture.md, "Code rules"); each test names
what breaks them, so a change that slips one back in fails here with the module and line.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "wormhole"

RUN_PATH = ("engine.py", "execution.py", "reader_manager.py", "writer_manager.py", "destination.py", "monitor.py",
            "counters.py", "result.py", "dirty.py", "pool.py", "exchange/*.py", "planning/*.py", "recovery/*.py",
            "source_facts.py", "run_parts.py", "run_report.py", "runner/*.py")
"""The modules of the run path and the recovery package, whose every function must fit a screen."""

GUARDED = {"reader_manager.py": ("ReaderManager", {"readers", "reader_manager"}),
           "writer_manager.py": ("WriterManager", {"writers", "writer_manager"}),
           "destination.py": ("Destination", {"dest", "destination", "destinations"})}
"""Classes whose state only their own methods change (the managers and the destination lifecycle), and the
names the code calls their objects by (``run.readers``, ``dest``, ``writers.destinations[d]``)."""

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
    """Stores parse their options with wormhole.options, never the engine configuration or the task model."""
    mods = modules()
    known = set(mods)
    offenders = [name for name, path in mods.items()
                 if name.startswith("wormhole.plugins.")
                 and {"wormhole.config", "wormhole.task_spec"} & imports_of(path, name, known)]
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
    """Every function of the engine, the execution seam, the managers, the destination lifecycle, the
    monitor, the counters, the exchange, the planning and the recovery package is at most 60 lines
    (docstring included)."""
    paths = [p for pattern in RUN_PATH for p in sorted(PACKAGE.glob(pattern))]
    assert len(paths) > len(RUN_PATH), "the run path's modules were not found"
    assert long_functions(paths) == []


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


def imported_names(path: Path, name: str) -> set[str]:
    """Every dotted name an import statement of ``path`` names (``from x import y``: ``x`` and
    ``x.y``), relative imports resolved, wherever it is, but not under ``if TYPE_CHECKING:`` (never run)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    typing_only = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If)
                   and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"
                   for stmt in node.body for n in ast.walk(stmt)}
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join([*parts[: len(parts) - node.level + 1], *filter(None, [base])])
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return found


def names_under(found: set[str], roots: tuple[str, ...]) -> list[str]:
    return sorted(n for n in found if any(n == r or n.startswith(f"{r}.") for r in roots))


STORES = PACKAGE / "plugins"


KITS = {"sql"}
"""Packages of wormhole/plugins/ that are kits the stores build on (the SQL store kit), not stores."""


def store_packages() -> list[Path]:
    return sorted(p.parent for p in STORES.glob("*/__init__.py") if p.parent.name not in KITS)


def is_spark_adapter(name: str) -> bool:
    """A store's Spark adapter: ``wormhole.plugins.<store>.spark``."""
    parts = name.split(".")
    return len(parts) == 4 and parts[:2] == ["wormhole", "plugins"] and parts[3] == "spark"


SPARK_KIT = "wormhole.plugins.spark_kit"
"""What the stores' Spark adapters need of Spark (types, helpers): part of the plugin contract."""


def test_only_spark_code_imports_pyspark() -> None:
    """pyspark (and py4j) are imported only by wormhole/spark/, the stores' Spark adapters
    (``plugins/<store>/spark.py``) and their kit (``plugins/spark_kit.py``), at module level or lazily
    inside a function alike: every other module works without the ``spark`` extra and reaches Spark
    through them."""
    mods = modules()
    offenders = {}
    for name, path in mods.items():
        if name == "wormhole.spark" or name.startswith("wormhole.spark.") or is_spark_adapter(name) \
                or name == SPARK_KIT:
            continue
        found = names_under(imported_names(path, name), ("pyspark", "py4j"))
        if found:
            offenders[name] = found
    assert offenders == {}
    assert names_under(imported_names(mods["wormhole.spark.runner"], "wormhole.spark.runner"), ("pyspark",)), \
        "the import walk found no pyspark import in the Spark runner: the test itself is broken"


ENGINE_RUNTIME = ("wormhole.engine", "wormhole.execution", "wormhole.reader_manager", "wormhole.writer_manager",
                  "wormhole.destination", "wormhole.recovery", "wormhole.monitor", "wormhole.spark.runner",
                  "wormhole.spark.accumulators", "wormhole.spark.splits", "wormhole.spark.transforms",
                  "wormhole.spark.throttle")
"""The engine's runtime: what runs a task (managers, recovery, Spark's execution). Stores are what it
runs; they see it only through the plugin contract (wormhole/plugins/base.py, facets.py, and
spark_kit.py for their Spark adapters)."""


def test_stores_import_nothing_of_the_engines_runtime() -> None:
    """No module of wormhole/plugins/ (the stores, their Spark adapters included, and the contract)
    imports the runtime, at module level or lazily: what a store needs from a run comes through its
    context and the contract, so the runtime can change without touching a store."""
    offenders = {}
    for name, path in modules().items():
        if name.startswith("wormhole.plugins."):
            found = names_under(imported_names(path, name), ENGINE_RUNTIME)
            if found:
                offenders[name] = found
    assert offenders == {}


STORE_MODULES = {"__init__.py", "options.py", "splitter.py", "reader.py", "periphery.py", "writer.py"}
"""The files every store package has, each role in its own module (short ones too), so a store is
read the same way whichever it is; ``spark.py`` only where the store has a Spark adapter. What a store
can do is said once, by the facets of the roles its ``__init__.py`` registers."""


def test_every_store_package_has_the_same_modules() -> None:
    packages = store_packages()
    assert {p.name for p in packages} >= {"file", "hive", "mysql", "sqlite", "stream"}
    missing = {p.name: sorted(STORE_MODULES - {f.name for f in p.glob("*.py")}) for p in packages}
    assert {k: v for k, v in missing.items() if v} == {}
    for package in packages:
        entry = (package / "__init__.py").read_text(encoding="utf-8")
        adapter = f"wormhole.plugins.{package.name}.spark:"
        assert (package / "spark.py").exists() == (adapter in entry), \
            f"{package.name}: spark.py is the Spark adapter its entry names (spark_read/spark_write)"
        spark_hooks = re.findall(r'spark_(?:read|write)="([^"]+)"', entry)
        assert all(h.startswith(adapter) for h in spark_hooks), f"{package.name}: {spark_hooks} not in spark.py"


def _attributes_of(path: Path, name: str) -> set[str]:
    """The attributes class ``name`` sets on ``self`` (in any of its methods), properties included."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    (cls,) = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == name]
    found: set[str] = set()
    for node in ast.walk(cls):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self" \
                and isinstance(node.ctx, ast.Store):
            found.add(node.attr)
        if isinstance(node, ast.FunctionDef) and any(isinstance(d, ast.Name) and d.id == "property"
                                                     for d in node.decorator_list):
            found.add(node.name)
    return found


def _called(node: ast.expr) -> str | None:
    """The name an object is called by: ``dest``, ``run.readers`` -> readers, ``w.destinations[i]`` -> destinations."""
    while isinstance(node, ast.Subscript | ast.Call):
        node = node.value if isinstance(node, ast.Subscript) else node.func
    if isinstance(node, ast.Name):
        return node.id
    return node.attr if isinstance(node, ast.Attribute) else None


def test_no_manager_attribute_is_assigned_from_outside_its_class() -> None:
    """What a manager (or a destination's lifecycle) holds it is given in its constructor or sets itself:
    no ``readers.x = ...``, ``dest.x = ...`` (nor ``+=``) of one of their attributes anywhere in the package."""
    guarded = {name: (cls, _attributes_of(PACKAGE / file, cls)) for file, (cls, names) in GUARDED.items()
               for name in names}
    assert {"resumed", "pushup", "coordinator"} <= guarded["readers"][1] | {"resumed"}, "the walk found nothing"
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets: list[ast.expr] = []
            if isinstance(node, ast.Assign):
                targets = [t for target in node.targets for t in (target.elts if isinstance(target, ast.Tuple)
                                                                   else [target])]
            elif isinstance(node, ast.AugAssign | ast.AnnAssign):
                targets = [node.target]
            for target in targets:
                if not isinstance(target, ast.Attribute):
                    continue
                cls, attrs = guarded.get(_called(target.value) or "", ("", set()))
                if target.attr in attrs:
                    offenders.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno} {ast.unparse(target)} ({cls})")
    assert offenders == []


def test_the_product_reads_no_test_setting() -> None:
    """Crash injection is a test seam (wormhole.recovery.crash, installed by tests/crash_entry.py): no module
    of the package reads a crash setting from the environment."""
    readers = [str(p.relative_to(PACKAGE.parent)) for p in PACKAGE.rglob("*.py")
               if "WORMHOLE_TEST_" in p.read_text(encoding="utf-8")]
    assert readers == []


# -- issue 36 item 5: boundaries (the stores' Spark kit, recovery and taskdb, the layers) ------------------


def test_no_store_module_imports_the_engines_spark() -> None:
    """No module of wormhole/plugins/ (a store, its Spark adapter, the contract) imports ``wormhole.spark``
    or one of its modules, at module level, lazily or for typing alike: an adapter takes what it needs of
    Spark from the kit (``plugins/spark_kit.py``) and the run's session from its context (``ctx.spark``)."""
    mods = modules()
    known = set(mods)
    offenders = {name: sorted(found) for name, path in mods.items() if name.startswith("wormhole.plugins.")
                 if (found := {t for t in imports_of(path, name, known)
                               if t == "wormhole.spark" or t.startswith("wormhole.spark.")})}
    assert offenders == {}
    adapters = [name for name in mods if is_spark_adapter(name)]
    assert len(adapters) >= 3 and all(SPARK_KIT in imports_of(mods[a], a, known) for a in adapters), \
        "the Spark adapters were not found, or one takes nothing from the kit: the test itself is broken?"


def test_recovery_and_taskdb_do_not_import_each_other_both_ways() -> None:
    """The task database implements recovery's protocols (``CheckpointStore``, ``RunHistory``) and imports
    recovery for them; recovery imports nothing of the task database (lazily or for typing alike)."""
    mods = modules()
    known = set(mods)

    def imported_by(package: str) -> set[str]:
        return {t for name, path in mods.items() if name == package or name.startswith(f"{package}.")
                for t in imports_of(path, name, known)}

    def within(found: set[str], package: str) -> list[str]:
        return sorted(t for t in found if t == package or t.startswith(f"{package}."))

    assert within(imported_by("wormhole.recovery"), "wormhole.taskdb") == []
    assert within(imported_by("wormhole.taskdb"), "wormhole.recovery"), \
        "the task database imports nothing of recovery: the test itself is broken (or the rule above is moot)"


LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("base values", ("wormhole", "wormhole.errors", "wormhole.redaction", "wormhole.log", "wormhole.sql_text",
                     "wormhole.options", "wormhole.spec_json", "wormhole.schedule")),
    ("plugin contract", ("wormhole.plugins", "wormhole.plugins.*", "wormhole.retry",
                         "wormhole.database.model", "wormhole.database.facet", "wormhole.database.ddl",
                         "wormhole.verify")),
    ("stores", ("wormhole.plugins.<store>",)),
    ("transform", ("wormhole.transform",)),
    ("task model", ("wormhole.config", "wormhole.task_spec", "wormhole.incremental", "wormhole.destination_checks",
                    "wormhole.variables", "wormhole.spark.config", "wormhole.database")),
    ("run parts", ("wormhole.exchange", "wormhole.counters", "wormhole.dirty", "wormhole.pool", "wormhole.result",
                   "wormhole.monitor", "wormhole.metrics", "wormhole.progress", "wormhole.planning.assign")),
    ("recovery and task database", ("wormhole.recovery", "wormhole.taskdb")),
    ("managers", ("wormhole.planning", "wormhole.reader_manager", "wormhole.writer_manager", "wormhole.destination",
                  "wormhole.execution", "wormhole.spark.methods", "wormhole.source_facts", "wormhole.run_parts",
                  "wormhole.run_report", "wormhole.database.expand", "wormhole.database.ddl_steps",
                  "wormhole.database.snapshot", "wormhole.verify.diff", "wormhole.verify.task",
                  "wormhole.verify.inrun", "wormhole.verify.repair", "wormhole.verify.sides",
                  "wormhole.verify.window", "wormhole.verify.by_plan")),
    ("engine and Spark", ("wormhole.engine", "wormhole.spark", "wormhole.runner", "wormhole.database.run",
                          "wormhole.database.report", "wormhole.database.progress")),
    ("front ends", ("wormhole.cli", "wormhole.daemon", "wormhole.entry", "wormhole.__main__", "wormhole.importers",
                    "wormhole.web")),
)
"""The layers of the package, lowest first; a module may import its own layer and the ones below:

0. base values: errors, redaction, log, SQL text, option parsing, JSON specs, cron schedules;
1. the plugin contract: ``plugins/*.py`` (base, batch, schema, values, capabilities, registry, the SQL,
   Arrow and Spark kits), the retry policy stores use, what a database task's stores share (the table
   model, the catalog facet, the DDL translation), and the checksum of rows (``verify``: a store's
   verification facet may give a digest);
2. the stores: ``plugins/<store>/`` (a store's modules, its Spark adapter);
3. transform: the operators, expressions and chains;
4. the task model: the task spec (``task_spec``) and the engine configuration (``config``), incremental
   windows, job variables, a database task's translation of tables between stores (``database``);
5. the run's parts: the exchange, counters, dirty file, thread pool, result, monitor and its views,
   the fair split assignment;
6. recovery and the task database;
7. the managers: planning, the reader and writer managers, the destination lifecycle, the execution seam,
   the run's stages (the source's facts, the run's parts, its report), a database task's expansion, the
   comparisons of two stores and of a task's copies (``verify.diff``, ``verify.task``; ``verify.window``: an
   incremental task's windows, as its checkpoints recorded them);
8. the engine, Spark mode, a database task's run (table runs of the engine) and the runner (a claimed run
   of either, below the CLI and the daemon);
9. the front ends: the CLI, the daemon, the DataX importer, the operations console (web).

Listed by module prefix; the most specific prefix wins (``wormhole.planning.assign`` is a run part,
the rest of ``wormhole.planning`` a manager). Two modules of ``wormhole.spark`` import no pyspark and sit
lower: ``spark.config`` chooses the run's Spark settings from the task and engine.toml (task model), and
``spark.methods`` asks the source, for the facts the plan is made from, what its Spark read carries as exact text.
``wormhole.plugins.*`` names the contract's modules, ``wormhole.plugins.<store>`` every module of a store package."""

UPWARD_ALLOWED = frozenset({
    ("wormhole.transform.plan", "wormhole.task_spec"),  # the transform plan is built from the task spec
    ("wormhole.source_facts", "wormhole.spark"),  # the facts say whether pyspark is installed (engine auto)
})
"""The imports that run from a lower layer up (at most 3), each by name: a new one fails the test below."""


def layer_of(name: str) -> int:
    parts = name.split(".")
    if parts[:2] == ["wormhole", "plugins"] and len(parts) > 2:
        store = (STORES / parts[2] / "__init__.py").exists()
        return next(i for i, (_, prefixes) in enumerate(LAYERS)
                    if ("wormhole.plugins.<store>" if store else "wormhole.plugins.*") in prefixes)
    best: tuple[int, int] | None = None
    for index, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            # The package itself is no prefix: a new top-level module must be placed in a layer by name.
            below = name.startswith(f"{prefix}.") and prefix != "wormhole"
            if (name == prefix or below) and (best is None or len(prefix) > best[1]):
                best = (index, len(prefix))
    assert best is not None, f"{name} is in no layer: add it to LAYERS"
    return best[0]


def test_imports_run_down_the_layers() -> None:
    """Every import (module level, lazy, for typing) runs to the importer's layer or one below it, but
    the few named in UPWARD_ALLOWED (at most 3)."""
    mods = modules()
    known = set(mods)
    upward = {(name, target) for name, path in mods.items() for target in imports_of(path, name, known)
              if layer_of(target) > layer_of(name)}
    assert len(UPWARD_ALLOWED) <= 3
    assert sorted(upward - UPWARD_ALLOWED) == []
    assert layer_of("wormhole.plugins.mysql.spark") == 2 and layer_of("wormhole.plugins.spark_kit") == 1


# -- a3-facets: cyclomatic complexity (issue 36) ---------------------------------------------------

MAX_COMPLEXITY = 20

COMPLEXITY_EXCEPTIONS: dict[str, str] = {}
"""Functions still above the limit, each with why; one that no longer is fails the test until it is dropped."""


def complexity(function: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """McCabe's cyclomatic complexity, counted as radon does: 1, plus 1 per ``if``/``elif`` and conditional
    expression, per ``for``/``while`` (and 1 more for its ``else``), per ``except`` handler (and 1 for a
    ``try``'s ``else``), per operand of a boolean operator beyond the first, per comprehension ``for`` and
    each of its ``if``s, and per ``case``. A nested function, class or lambda counts apart, not here.
    (Ruff's C901, held at 12 in ruff.toml, counts fewer: no boolean operator, no comprehension.)"""
    count = 1
    stack = list(ast.iter_child_nodes(function))
    while stack:
        node = stack.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda):
            continue
        if isinstance(node, ast.If | ast.IfExp | ast.match_case):
            count += 1
        elif isinstance(node, ast.For | ast.AsyncFor | ast.While):
            count += 1 + bool(node.orelse)
        elif isinstance(node, ast.Try | ast.TryStar):
            count += len(node.handlers) + bool(node.orelse)
        elif isinstance(node, ast.BoolOp):
            count += len(node.values) - 1
        elif isinstance(node, ast.comprehension):
            count += 1 + len(node.ifs)
        stack.extend(ast.iter_child_nodes(node))
    return count


def test_no_function_above_cyclomatic_complexity_20() -> None:
    found: dict[str, int] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):  # methods of a module's classes: the most
                name = f"{path.relative_to(PACKAGE)} {node.name}"
                found[name] = max(complexity(node), found.get(name, 0))
    assert len(found) > 1000, "the walk found too few functions: the test itself is broken"
    over = {name: cc for name, cc in found.items() if cc > MAX_COMPLEXITY}
    assert {k: v for k, v in over.items() if k not in COMPLEXITY_EXCEPTIONS} == {}
    stale = sorted(set(COMPLEXITY_EXCEPTIONS) - set(over))
    assert stale == [], f"no longer above {MAX_COMPLEXITY}: drop {stale} from COMPLEXITY_EXCEPTIONS"


def test_the_complexity_count_is_radons() -> None:
    source = '''
def f(a, b):
    if a and b or a:          # 1 + if 1 + boolean operators 2
        return [x for x in a if x]   # comprehension 1 + its if 1
    elif b:                   # 1
        pass
    for x in a:               # 1, its else 1
        pass
    else:
        pass
    try:                      # two handlers 2, else 1
        pass
    except ValueError:
        pass
    except KeyError:
        pass
    else:
        pass
    def inner():              # counts apart
        if a:
            pass
    return 1 if a else 2      # 1
'''
    (function,) = ast.parse(source).body
    assert isinstance(function, ast.FunctionDef)
    assert complexity(function) == 1 + 1 + 2 + 1 + 1 + 1 + 2 + 3 + 1


# -- architecture step 3, item 4: one batch type (a3-batch) ----------------------------------------------

PLUGIN_CONTRACT = ("plugins/base.py", "plugins/writing.py", "plugins/capabilities.py", "plugins/facets.py")
"""The plugin contract: the Protocols and declarations every store implements or reads (those that exist)."""


def test_the_plugin_contract_names_no_sequence_of_rows() -> None:
    """A writer gets a ``Batch`` (the one batch type), never a ``Sequence[Row]``; a row-at-a-time store takes
    the tuples from ``rows_of(batch)``."""
    named = [f"{name}:{number}" for name in PLUGIN_CONTRACT if (PACKAGE / name).exists()
             for number, line in enumerate((PACKAGE / name).read_text(encoding="utf-8").splitlines(), 1)
             if "Sequence[Row]" in line]
    assert named == []


def test_the_writer_contract_takes_a_batch() -> None:
    tree = ast.parse((PACKAGE / "plugins/writing.py").read_text(encoding="utf-8"))
    methods = {f"{cls.name}.{fn.name}": fn for cls in tree.body if isinstance(cls, ast.ClassDef)
               for fn in cls.body if isinstance(fn, ast.FunctionDef) and fn.name in ("write", "write_split")}
    assert set(methods) == {"Writer.write", "SplitWriter.write_split"}
    for name, fn in methods.items():
        assert ast.unparse(fn.args.args[-1].annotation or ast.Constant(None)) == "Batch", name


def test_no_store_tells_a_batch_from_tuples_by_isinstance() -> None:
    """Every writer gets a Batch: no store module asks ``isinstance(rows, Rows)`` (or ``Batch``) of what it got."""
    asking = []
    for path in sorted((PACKAGE / "plugins").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "isinstance" \
                    and len(node.args) == 2 and ast.unparse(node.args[1]) in ("Rows", "Batch"):
                asking.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}")
    assert [a for a in asking if not a.startswith("wormhole/plugins/batch.py:")] == []  # as_batch makes one


def test_a_batch_is_no_sequence_of_rows() -> None:
    """A batch is an Arrow record batch (issue 36, item 4): it is not a Sequence, cannot be iterated nor
    indexed as rows, so no writer treats it as tuples; ``rows_of(batch)`` is the one way to them."""
    from collections.abc import Iterable
    from collections.abc import Sequence as AbcSequence

    from wormhole.plugins.batch import Batch

    assert not issubclass(Batch, (AbcSequence, Iterable))
    assert not any(hasattr(Batch, name) for name in ("__iter__", "__getitem__", "__contains__", "__reversed__"))


def test_no_function_tests_the_type_of_a_batch_it_was_given() -> None:
    """A function given a ``Batch`` (a writer's ``write``, an encoder's piece) never asks ``isinstance`` of it:
    what a destination loads (Arrow columns, a source's encoding, its wire text) is chosen once, not per batch."""
    asking = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for fn in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            given = {a.arg for a in (*fn.args.args, *fn.args.kwonlyargs)
                     if a.annotation is not None and ast.unparse(a.annotation) == "Batch"}
            asking += [f"{path.relative_to(PACKAGE.parent)}:{node.lineno}" for node in ast.walk(fn)
                       if given and isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                       and node.func.id == "isinstance" and node.args and isinstance(node.args[0], ast.Name)
                       and node.args[0].id in given]
    assert asking == []



def test_only_write_encoded_reads_a_batchs_source_form() -> None:
    """A batch's source forms (``encoded``: a source's binary rows; ``wire``: the mysql reader's text) are chosen
    once per destination (``EncodedWriter``): in the stores, only a ``write_encoded`` method reads them from a
    batch it was given, never ``write``, ``write_split`` nor a helper deciding per batch."""
    readers = []
    for path in sorted((PACKAGE / "plugins").rglob("*.py")):
        for fn in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            given = {a.arg for a in (*fn.args.args, *fn.args.kwonlyargs)
                     if a.annotation is not None and ast.unparse(a.annotation) == "Batch"}
            if any(isinstance(node, ast.Attribute) and node.attr in ("encoded", "wire")
                   and isinstance(node.value, ast.Name) and node.value.id in given for node in ast.walk(fn)):
                readers.append(f"{path.relative_to(PACKAGE)}:{fn.name}")
    assert sorted(readers) == ["plugins/mysql/writer.py:write_encoded", "plugins/postgres/writer.py:write_encoded"]


def test_the_stores_that_load_a_source_form_are_encoded_writers() -> None:
    """A destination whose facets may choose its source's form has writers with ``write_encoded``, which the
    engine calls for every batch once chosen (``EncodedTarget``)."""
    from wormhole.plugins.mysql.writer import MysqlWriter
    from wormhole.plugins.postgres.writer import PostgresWriter
    from wormhole.plugins.registry import sink

    for name, writer in (("mysql", MysqlWriter), ("postgres", PostgresWriter)):
        role = sink(name)
        assert role.uses_wire_text or role.encoded is not None, name
        assert callable(getattr(writer, "write_encoded", None)), name


# -- the SQL store kit (issue 36, item 1: the read side and the options) ------------------------------

def test_the_sql_stores_sources_are_the_kits_with_a_dialect() -> None:
    """Each SQL store's splitter and reader are the kit's, driven by the store's Dialect (which has every
    member of the kit's protocol), and its source params resolve through the kit's SourceParams: shapes,
    checks, shard walking and key cutting live once, in wormhole/plugins/sql/."""
    import importlib

    from wormhole.plugins.sql.dialect import Dialect
    from wormhole.plugins.sql.reader import SqlReader
    from wormhole.plugins.sql.source_options import SourceParams
    from wormhole.plugins.sql.splitter import SqlSplitter

    members = {name for name in vars(Dialect) if not name.startswith("_")} | set(Dialect.__annotations__)
    for store in ("mysql", "postgres"):
        plugin = importlib.import_module(f"wormhole.plugins.{store}").PLUGIN
        source = plugin.source
        assert issubclass(source.splitter, SqlSplitter) and issubclass(source.reader, SqlReader), store
        assert issubclass(source.options, SourceParams), store
        dialect = source.splitter.DIALECT
        assert dialect is source.reader.DIALECT, store
        assert sorted(m for m in members if not hasattr(dialect, m)) == [], store


# -- the SQL store kit (issue 36, item 1: the write side) --------------------------------------------

SQL_STORES = ("mysql", "postgres")
"""The stores whose destinations are built on the SQL store kit (wormhole/plugins/sql/)."""


def test_the_sql_stores_destinations_are_the_kits_with_a_dialect() -> None:
    """Each SQL store's destination is the kit's periphery and writer driven by the store's dialect, which
    has every member of the kit's Dialect protocol: the phases, markers, staging names, leftovers and
    settling live once, in the kit."""
    import importlib

    from wormhole.plugins.sql.dialect import Dialect
    from wormhole.plugins.sql.periphery import SqlWriterPeriphery
    from wormhole.plugins.sql.writer import SqlWriter

    members = {name for name in vars(Dialect) if not name.startswith("_")} | set(Dialect.__annotations__)
    entry = {"mysql": ("MysqlWriterPeriphery", "MysqlWriter"),
             "postgres": ("PostgresWriterPeriphery", "PostgresWriter")}
    for store in SQL_STORES:
        package = importlib.import_module(f"wormhole.plugins.{store}")
        dialect = importlib.import_module(f"wormhole.plugins.{store}.dialect")
        instances = [v for v in vars(dialect).values() if type(v).__name__.endswith("Dialect")]
        assert len(instances) == 1, f"{store}: one dialect object"
        assert sorted(m for m in members if not hasattr(instances[0], m)) == [], store
        periphery, writer = (getattr(package, name) for name in entry[store])
        assert issubclass(periphery, SqlWriterPeriphery) and issubclass(writer, SqlWriter), store


def test_no_sql_store_keeps_its_own_markers_or_staging_names() -> None:
    """The split markers table, the staging table's marker comment and the leftovers' search are the kit's:
    no store module spells them again, and no SQL store imports another."""
    for store in (*SQL_STORES, "sqlite"):
        for path in sorted((STORES / store).glob("*.py")):
            text = path.read_text(encoding="utf-8")
            assert "wormhole_splits" not in text.replace("``wormhole_splits``", ""), path
            assert "wormhole:(?:db=" not in text, path
            name = module_name(path)
            others = tuple(f"wormhole.plugins.{s}" for s in SQL_STORES if s != store)
            assert names_under(imported_names(path, name), others) == [], path


# -- the SQL store kit (issue 36, item 1: one Dialect per store, a3-dialect) -------------------------

def test_each_sql_store_has_one_dialect_object_for_both_sides() -> None:
    """A SQL store's source and destination ask the same Dialect object (plugins/<store>/dialect.py): no
    second dialect module or protocol for the read side."""
    import importlib

    assert not (STORES / "sql" / "source_dialect.py").exists()
    for store in SQL_STORES:
        assert not (STORES / store / "source_dialect.py").exists(), store
        package = importlib.import_module(f"wormhole.plugins.{store}")
        dialect = importlib.import_module(f"wormhole.plugins.{store}.dialect")
        (instance,) = [v for v in vars(dialect).values() if type(v).__name__.endswith("Dialect")]
        assert package.PLUGIN.source.splitter.DIALECT is instance, store
        assert package.PLUGIN.source.reader.DIALECT is instance, store
        writer = {"mysql": "MysqlWriter", "postgres": "PostgresWriter"}[store]
        assert getattr(package, writer).dialect is instance, store


# -- a3-stages: the run in finished stages, the runner below the CLI ----------------------------------------


def test_planning_asks_no_store() -> None:
    """The plan is decided from the source's facts (wormhole.source_facts asks the source): no planning module
    imports the read side, the execution or the pool that runs a store's calls under a timeout (not even for
    typing), nor the facts' module but for typing."""
    mods = modules()
    known = set(mods)
    offenders = {}
    for name, path in mods.items():
        if name.startswith("wormhole.planning."):
            found = sorted(imports_of(path, name, known) & {"wormhole.reader_manager", "wormhole.pool",
                                                              "wormhole.execution"})
            found += names_under(imported_names(path, name), ("wormhole.source_facts",))
            if found:
                offenders[name] = found
    assert "wormhole.planning.plan" in mods, "the planning modules were not found"
    assert offenders == {}


def test_planning_imports_nothing_of_spark() -> None:
    """make_plan does no I/O: what a Spark-mode plan needs (pyspark installed, the master's origin, the columns
    the source's Spark read carries as exact text, which the MySQL and PostgreSQL reads ask their databases)
    comes in the facts (wormhole.source_facts.spark_facts). No planning module imports wormhole.spark or a
    module in it, not even lazily or for typing."""
    mods = modules()
    known = set(mods)
    offenders = {name: within for name, path in mods.items() if name.startswith("wormhole.planning.")
                 if (within := names_under(imports_of(path, name, known), ("wormhole.spark",)))}
    assert "wormhole.planning.methods" in mods, "the planning modules were not found"
    assert names_under(imports_of(mods["wormhole.source_facts"], "wormhole.source_facts", known),
                       ("wormhole.spark",)), "the facts stage asks nothing of Spark: the test itself is broken"
    assert offenders == {}


def test_the_runner_sits_below_the_cli() -> None:
    """wormhole.runner (claims, patience, the engine's run under a claim) imports nothing of wormhole.cli,
    and the daemon reaches the runner without loading the engine (only its children run one)."""
    mods = modules()
    runner = [n for n in mods if n == "wormhole.runner" or n.startswith("wormhole.runner.")]
    assert len(runner) > 3, "the runner's modules were not found"
    assert {n: names_under(imported_names(mods[n], n), ("wormhole.cli",)) for n in runner
            if names_under(imported_names(mods[n], n), ("wormhole.cli",))} == {}
    daemon = imported_names(mods["wormhole.daemon"], "wormhole.daemon")
    assert names_under(daemon, ("wormhole.runner",)), "the daemon does not use the runner"
    assert not names_under(daemon, ("wormhole.engine", "wormhole.runner.run", "wormhole.runner.engine_run"))
