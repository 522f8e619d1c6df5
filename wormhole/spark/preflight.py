"""The executors checked before any destination is prepared (``[spark] preflight``).

A cluster whose workers lack the executors' Python, wormhole's dependencies, a file destination's
storage or a JDBC driver would otherwise fail each destination's job after the whole source was read,
and a destination prepared with ``load: truncate`` would already have lost its rows. One small job, a
task per executor core, asks every executor first: its Python starts, imports wormhole at the driver's
version (and pyarrow), sees a probe file the driver put beside each file destination's path (a hive
destination's: the warehouse and the staging directory, which executors write), and its
JVM loads each JDBC driver class of ``spark.jars``. A failure names the executor, what is missing and
the setting that fixes it, and nothing of any destination has been touched.
"""

from __future__ import annotations

import contextlib
import threading
import uuid
import zipfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import wormhole
from wormhole.errors import ConfigError
from wormhole.log import Logger
from wormhole.planning.methods import write_method
from wormhole.plugins import registry
from wormhole.plugins.spark_errors import MODULE_HINT, describe_spark_error

TIMEOUT_S = 180.0
"""How long the check waits for executors (a cluster without a free worker never starts the job)."""
PROBE_PREFIX = ".wormhole-probe-"

PATH_HINT = ("file destinations on a cluster need storage that every worker and the driver share at the same "
             "path (NFS, a mounted volume)")
VERSION_HINT = "ship the driver's wormhole with `wormhole spark pack` and [spark] archive"
JDBC_HINT = "the JDBC driver's jar must reach the executors: [spark] jars (shipped with spark.jars)"


class ExecutorsNotReady(ConfigError):
    code = "SPARK_EXECUTORS_NOT_READY"
    exit_code = 203  # the task is fine; the cluster is not


@dataclass(frozen=True, slots=True)
class Probe:
    destination: str
    path: str
    """The destination's path as the task names it."""
    file: Path
    """The probe file the driver wrote in the path's nearest existing directory."""


def jdbc_driver_classes(jars: Sequence[str]) -> list[str]:
    """The JDBC driver classes the jars declare (``META-INF/services/java.sql.Driver``)."""
    found: list[str] = []
    for jar in jars:
        with contextlib.suppress(OSError, KeyError, zipfile.BadZipFile), zipfile.ZipFile(jar) as zf:
            text = zf.read("META-INF/services/java.sql.Driver").decode()
            found += [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.startswith("#")]
    return list(dict.fromkeys(found))


def file_destinations(destinations: Sequence[Any]) -> list[tuple[str, str]]:
    """(id, path) of the destinations whose rows the executors write into a local path."""
    out: list[tuple[str, str]] = []
    for dest in destinations:
        sink = registry.get(dest.plugin).sink
        path = sink.owned_path(dest.options) if sink is not None and sink.owned_path is not None else None
        if path is None or "://" in path or write_method(dest.plugin, dest.options, frozenset()) == "driver":
            continue
        out.append((dest.id, path))
    return out


def catalog_destinations(destinations: Sequence[Any], places: Sequence[str]) -> list[tuple[str, str]]:
    """(id, path) for each of ``places`` (the warehouse, the staging directory) of every destination whose
    store writes through the session's catalog (hive): its executors write there."""
    out: list[tuple[str, str]] = []
    for dest in destinations:
        sink = registry.get(dest.plugin).sink
        if sink is not None and sink.needs_spark:
            out += [(dest.id, path) for path in places if "://" not in path]
    return out


def place_probes(paths: Sequence[tuple[str, str]]) -> list[Probe]:
    """A probe file in each path's nearest existing directory (the destination itself is not touched)."""
    probes: list[Probe] = []
    for dest_id, path in paths:
        where = Path(path).resolve()
        while not where.is_dir() and where != where.parent:
            where = where.parent
        probe = where / f"{PROBE_PREFIX}{uuid.uuid4().hex}"
        try:
            probe.write_text("wormhole checks that the Spark executors see this directory\n")
        except OSError:
            continue  # the driver cannot write there: the destination's prepare says so
        probes.append(Probe(dest_id, path, probe))
    return probes


def check_executors(spark: Any, destinations: Sequence[Any], jars: Sequence[str], log: Logger,
                    timeout_s: float = TIMEOUT_S, catalog_places: Sequence[str] = ()) -> None:
    """Run the check (see the module's docstring); ExecutorsNotReady naming every problem found.
    ``catalog_places``: the directories a hive destination's executors write (warehouse, staging)."""
    sc = spark.sparkContext
    cores = max(int(sc.defaultParallelism), 1)
    probes = place_probes(file_destinations(destinations) + catalog_destinations(destinations, catalog_places))
    try:
        reports = _run(sc, cores, [(p.destination, str(p.file)) for p in probes], timeout_s)
    except ExecutorsNotReady:
        raise
    except Exception as exc:
        raise ExecutorsNotReady(f"the Spark executors cannot run wormhole: {describe_spark_error(exc)}") from exc
    finally:
        for probe in probes:
            probe.file.unlink(missing_ok=True)
    problems = _problems(reports, {(p.destination, str(p.file)): p.path for p in probes})
    problems += _jdbc_problems(spark, cores, jdbc_driver_classes(jars))
    if problems:
        raise ExecutorsNotReady("the Spark executors are not ready (nothing was prepared): " + "; ".join(problems))
    log.info("spark.executors_checked", tasks=len(reports), executors=sorted({r["executor"] for r in reports}),
             file_destinations=[p.destination for p in probes], jdbc_drivers=jdbc_driver_classes(jars))


def _run(sc: Any, cores: int, probes: list[tuple[str, str]], timeout_s: float) -> list[dict[str, Any]]:
    """One task per core; cancelled after ``timeout_s`` (no executor ever came)."""
    group = f"wormhole-preflight-{uuid.uuid4().hex[:8]}"
    sc.setJobGroup(group, "wormhole: check the executors", interruptOnCancel=True)
    timed_out = threading.Event()

    def cancel() -> None:
        timed_out.set()
        sc.cancelJobGroup(group)

    timer = threading.Timer(timeout_s, cancel)
    timer.daemon = True
    timer.start()
    try:
        return sc.parallelize(range(cores), cores).mapPartitions(_probe_function(probes)).collect()  # type: ignore[no-any-return]
    except Exception as exc:
        if timed_out.is_set():
            raise ExecutorsNotReady(f"no Spark executor ran the check within {timeout_s:g} s on master {sc.master}: "
                                    "are workers registered, with enough free cores and memory for "
                                    "spark.executor.cores / spark.executor.memory?") from exc
        raise
    finally:
        timer.cancel()


def _probe_function(probes: list[tuple[str, str]]) -> Any:
    # Nested, so cloudpickle sends it by value: it runs in a Python that cannot import wormhole too.
    def probe(_part: Iterator[int]) -> Iterator[dict[str, Any]]:
        import os
        import socket
        import sys

        report: dict[str, Any] = {"executor": f"{socket.gethostname()}:{os.path.basename(os.getcwd())}",
                                  "python": sys.executable, "version": None, "missing": None}
        try:
            import pyarrow  # noqa: F401

            import wormhole as wh
            report["version"] = wh.__version__
        except ImportError as exc:
            report["missing"] = f"{type(exc).__name__}: {exc}"
        report["unseen"] = [(dest, path) for dest, path in probes if not os.path.exists(path)]
        yield report
    return probe


def _problems(reports: list[dict[str, Any]], paths: dict[tuple[str, str], str]) -> list[str]:
    problems: list[str] = []
    for report in {r["executor"]: r for r in reports}.values():
        where = f"executor {report['executor']} (Python {report['python']})"
        if report["missing"]:
            problems.append(f"{where}: {report['missing']}: {MODULE_HINT}")
        elif report["version"] != wormhole.__version__:
            problems.append(f"{where} imports wormhole {report['version']}, the driver runs {wormhole.__version__}: "
                            + VERSION_HINT)
        for dest, probe in report["unseen"]:
            problems.append(f"{where} cannot see destination {dest}'s path {paths[dest, probe]}: {PATH_HINT}")
    return problems


def _jdbc_problems(spark: Any, cores: int, classes: list[str]) -> list[str]:
    """Each JDBC driver class loaded in the executors' JVMs (through Spark's class loader, the one
    ``spark.jars`` feeds), a task per core."""
    problems: list[str] = []
    for name in classes:
        expr = f"java_method('org.apache.spark.util.Utils', 'classForName', '{name}', true, false)"
        try:
            spark.range(0, cores, 1, cores).selectExpr(expr).collect()
        except Exception as exc:
            problems.append(f"JDBC driver {name}: {describe_spark_error(exc)}: {JDBC_HINT}")
    return problems
