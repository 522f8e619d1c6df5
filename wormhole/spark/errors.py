"""What a failed Spark job says, in one line a user can act on (no pyspark import: unit-testable).

A Spark failure arrives as a Py4J error wrapping a JVM stack trace, or as the executor's Python
traceback. The line that names what failed (``Cannot run program "/venv/bin/python3"``,
``ClassNotFoundException: org.mariadb.jdbc.Driver``, a path) is usually the first exception of the
chain, and the deepest ``Caused by:`` says why (``error=2, No such file or directory``): both are kept,
with the executor that failed, and for a few well-known causes the setting that fixes them.
"""

from __future__ import annotations

import re

_EXCEPTION_LINE = re.compile(r"^(?:Caused by: )?([A-Za-z_][\w$.]*(?:Error|Exception|Exceeded)): (.+)$")
_LOST_TASK = re.compile(r"Lost task \S+ in stage \S+ \(TID \d+\) \((?P<host>\S+) executor (?P<executor>[^)]+)\): "
                        r"(?P<rest>.+)$")
_PROGRAM = re.compile(r'Cannot run program "(?P<program>[^"]+)"')

PYTHON_HINT = ("the executors' Python is not there on the worker: set [spark] python to a "
               "Python every worker has, or ship one with `wormhole spark pack` and [spark] archive")
MODULE_HINT = ("the executors' Python lacks a module the job needs: ship wormhole and its dependencies with "
               "`wormhole spark pack` and [spark] archive, or install them on every worker")


def describe_spark_error(exc: BaseException | str) -> str:
    """The useful line of a failed Spark job: the executor's Python exception when there is one, else
    the first Java exception that says what failed plus the deepest cause when it adds something, else
    Spark's own message, else the first line; with the executor that failed (a cluster's) and a hint."""
    text = exc if isinstance(exc, str) else str(exc)
    python_error = spark_error = executor = None
    java: list[str] = []
    for raw in text.splitlines():
        line = raw.strip().lstrip(": ")
        lost = _LOST_TASK.search(line)
        if lost is not None:
            if executor is None and lost["executor"] != "driver":
                executor = f"executor {lost['executor']} on {lost['host']}"
            line = lost["rest"]  # the task's own failure, after Spark's "Job aborted" wrapper
        match = _EXCEPTION_LINE.match(line)
        kind, said = _classify(*match.groups()) if match is not None else (None, "")
        if kind == "spark":
            spark_error = spark_error or said
        elif kind == "python":
            python_error = said
        elif kind == "java":
            java.append(said)
    first = next((ln.strip() for ln in text.splitlines() if ln.strip()), type(exc).__name__)
    described = python_error or _java(java) or spark_error or first
    if executor is not None:
        described += f" ({executor})"
    hint = _hint(described)
    return (f"{described}: {hint}" if hint else described)[:2000]


def _classify(name: str, message: str) -> tuple[str | None, str]:
    """What an exception line of the trace is (``spark``'s wrapper, the executor's ``python`` error,
    a ``java`` exception, or None for the plumbing between them) and how it is told."""
    if name.startswith("org.apache.spark.") and not name.endswith("PythonException"):
        return "spark", f"{name.rsplit('.', 1)[-1]}: {message}"
    if name.startswith(("py4j.", "java.lang.reflect.")) or name.endswith("PythonException"):
        return None, ""
    if name.startswith("wormhole."):
        return "python", message  # our own errors already say what failed and where
    if "." not in name:
        return "python", f"{name}: {message}"
    return "java", f"{name.rsplit('.', 1)[-1]}: {message}"


def _java(chain: list[str]) -> str | None:
    """The first exception of a Java chain (it names the program, class or path), and the deepest
    cause when the first's message does not already end with it."""
    if not chain:
        return None
    first, deepest = chain[0], chain[-1]
    # A cause Java already appended to the first message ("...": error=2, No such file) says nothing new.
    return first if first.endswith(deepest.split(": ", 1)[-1]) else f"{first} (caused by {deepest})"


def _hint(described: str) -> str | None:
    program = _PROGRAM.search(described)
    if program is not None and "python" in program["program"].rsplit("/", 1)[-1]:
        return PYTHON_HINT
    if described.startswith("ModuleNotFoundError: No module named"):
        return MODULE_HINT
    return None
