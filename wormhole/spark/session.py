"""The process's one SparkSession, built from ``[spark]`` in conf/engine.toml.

Defaults make a task's data round-trip unchanged and its logs readable: UTC everywhere (JVM,
session, so DATETIME values never shift), naive timestamps (``TimestampNTZ``), Spark's console
progress bar and UI off, Spark's own log4j output at ERROR (our JSON log lines stay readable),
the executors' Python the driver's interpreter on a local master (else ``[spark] python`` or the shipped
archive's: :func:`executor_python`), the JVM's own output in ``var/spark/jvm.log`` (not on the screen),
MariaDB Connector/J and pgjdbc on the classpath,
and Hive support over an embedded Derby metastore under ``var/``; the driver JVM compiles later than by
default (:data:`JIT_OPTIONS`). The wormhole package is zipped
and shipped with ``addPyFile`` so executors on a cluster import the same code as the driver.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import sys
import threading
import time
import zipfile
from pathlib import Path
from typing import Any

import structlog
from pyspark.sql import SparkSession

import wormhole
from wormhole.config import SparkConf
from wormhole.errors import ConfigError
from wormhole.plugins.spark_errors import describe_spark_error
from wormhole.spark.config import is_local

log = structlog.get_logger("wormhole.spark")

__all__ = ["describe_spark_error", "get_session", "stop_session"]

CONNECTOR_J = "/usr/share/java/mariadb-java-client.jar"
"""Debian's libmariadb-java, which ``make install`` installs."""
PG_JDBC = "/usr/share/java/postgresql.jar"
"""Debian's libpostgresql-jdbc-java (pgjdbc), which ``make install`` installs for the postgres store."""

_LOG4J = """\
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = spark %d{HH:mm:ss} %p %c{1}: %m%n%ex
"""

JIT_OPTIONS = "-XX:CompileThresholdScaling=4"
"""The driver JVM compiles a method after 4x the usual calls: a task's run is short, and at the default
thresholds the JIT compiler threads took a third of the JVM's CPU (19 of 53 s copying 5M rows on
``local[2]``, mostly Spark's one-off planning code); the rows' hot loops are compiled all the same
(the task threads' CPU unchanged). On a local master the driver is the executor too."""

ARCHIVE_ALIAS = "wormhole_env"
"""The directory the shipped archive is unpacked into, in each executor's working directory."""

_ENV_PYTHON = os.environ.get("PYSPARK_PYTHON")
"""The process's own PYSPARK_PYTHON (each session sets the variable to its executors' Python)."""

_lock = threading.Lock()
_session: SparkSession | None = None
_startup_s: float = 0.0


def default_jars() -> tuple[str, ...]:
    """The JDBC drivers installed where Debian puts them (a missing one is left out: only its store's
    JDBC paths need it)."""
    return tuple(jar for jar in (CONNECTOR_J, PG_JDBC) if os.path.isfile(jar))


def builder_settings(conf: SparkConf) -> dict[str, str]:
    """Every setting the session is built with: our defaults, then the user's ``[spark.conf]``."""
    metastore = Path(conf.metastore_dir).resolve()
    warehouse = Path(conf.warehouse_dir).resolve()
    log4j = _log4j_file(metastore.parent)
    java_opts = (f"-Duser.timezone=UTC -Dlog4j2.configurationFile=file:{log4j} -Dderby.system.home={metastore} "
                 f"{JIT_OPTIONS}")
    jars = conf.jars if conf.jars is not None else default_jars()
    settings: dict[str, str] = {
        "spark.master": conf.master,
        "spark.app.name": conf.app_name,
        "spark.sql.session.timeZone": "UTC",
        "spark.driver.extraJavaOptions": java_opts,
        "spark.executor.extraJavaOptions": "-Duser.timezone=UTC",
        "spark.executorEnv.TZ": "UTC",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.scheduler.mode": "FAIR",  # one pool per destination: their jobs share the executors
        "spark.pyspark.python": executor_python(conf),
        "spark.pyspark.driver.python": sys.executable,
        "spark.sql.warehouse.dir": str(warehouse),
        "spark.hadoop.javax.jdo.option.ConnectionURL":
            f"jdbc:derby:;databaseName={metastore / 'metastore_db'};create=true",
    }
    if jars:
        settings["spark.jars"] = ",".join(jars)
    if conf.archive is not None and not is_local(conf.master):
        settings["spark.archives"] = f"{Path(conf.archive).resolve()}#{ARCHIVE_ALIAS}"
    settings.update({k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in conf.conf.items()})
    return settings


def executor_python(conf: SparkConf) -> str:
    """The executors' Python: ``[spark] python`` (workers that have one), else the shipped archive's
    (a cluster master), else ``PYSPARK_PYTHON``, else the driver's own interpreter (a local master, or
    workers that see the driver's files). ``spark.pyspark.python`` in ``[spark.conf]`` overrides them."""
    if conf.python:
        return conf.python
    if conf.archive is not None and not is_local(conf.master):
        return f"./{ARCHIVE_ALIAS}/bin/python"
    return _ENV_PYTHON or sys.executable


def jvm_log_path(conf: SparkConf) -> Path:
    """Where the JVM's own output goes (its log4j lines, spark-submit's warnings): a file, not the screen."""
    return Path(conf.metastore_dir).resolve().parent / "jvm.log"


def _launch_jvm(settings: dict[str, str], jvm_log: Path) -> None:
    """Start the gateway JVM ourselves, its stdout and stderr appended to ``jvm_log``: PySpark would
    let it write onto the terminal. A JVM already running (an earlier session's) is kept."""
    from pyspark import SparkConf as PySparkConf
    from pyspark import SparkContext
    from pyspark.java_gateway import launch_gateway

    if SparkContext._gateway is not None:
        return
    jvm_log.parent.mkdir(parents=True, exist_ok=True)
    with jvm_log.open("ab") as out:  # the child keeps its own copy of the descriptor
        try:
            gateway = launch_gateway(PySparkConf(loadDefaults=False).setAll(list(settings.items())),
                                     popen_kwargs={"stdout": out, "stderr": out})
        except Exception as exc:
            tail = jvm_log.read_text(errors="replace").strip().splitlines()[-5:]
            raise RuntimeError(f"the Spark JVM did not start ({exc}); the end of {jvm_log}: "
                               + " | ".join(tail)) from exc
    SparkContext._gateway = gateway
    SparkContext._jvm = gateway.jvm


def get_session(conf: SparkConf) -> SparkSession:
    """The process's SparkSession, built on first use (later calls return the same one)."""
    global _session, _startup_s
    with _lock:
        if _session is not None:
            return _session
        t0 = time.monotonic()
        Path(conf.metastore_dir).mkdir(parents=True, exist_ok=True)
        Path(conf.warehouse_dir).mkdir(parents=True, exist_ok=True)
        if conf.archive is not None and not is_local(conf.master) and not Path(conf.archive).is_file():
            raise ConfigError(f"[spark] archive {conf.archive} does not exist: build it with `wormhole spark pack`")
        settings = builder_settings(conf)
        # PySpark takes the executors' interpreter from the environment, not from the conf.
        os.environ["PYSPARK_PYTHON"] = settings["spark.pyspark.python"]
        jvm_log = jvm_log_path(conf)
        log.info("spark.session_starting", master=conf.master, executor_python=settings["spark.pyspark.python"],
                 archive=settings.get("spark.archives"), jvm_log=str(jvm_log))
        _launch_jvm(settings, jvm_log)
        builder = SparkSession.builder
        for key, value in settings.items():
            builder = builder.config(key, value)
        if conf.hive:
            builder = builder.enableHiveSupport()
        session = builder.getOrCreate()
        session.sparkContext.setLogLevel("ERROR")
        session.sparkContext.addPyFile(str(package_zip(Path(conf.metastore_dir).resolve().parent)))
        _startup_s = round(time.monotonic() - t0, 3)
        log.info("spark.session_started", master=session.sparkContext.master, startup_s=_startup_s,
                 version=session.version, hive=conf.hive)
        _session = session
        return session


def is_running() -> bool:
    return _session is not None


def startup_s() -> float:
    """How long building the session took (0 until it is built)."""
    return _startup_s


def stop_session() -> None:
    global _session
    with _lock:
        if _session is not None:
            _session.stop()
            _session = None


def session_fault(session: SparkSession) -> str | None:
    """Why ``session`` cannot serve another job (its context stopped, its JVM gone, or its gateway
    answering out of turn after a call was interrupted), or None when it answers. Two gateway calls:
    cheap enough to ask before every job a long-lived process starts."""
    try:
        jsc = session.sparkContext._jsc
        if jsc is None or jsc.sc().isStopped():
            return "the SparkContext is stopped"
        # A call interrupted mid-answer leaves the next caller reading another call's answer.
        jvm = session.sparkContext._jvm
        if jvm is None:
            return "the SparkContext has no JVM"
        answer = jvm.java.lang.Math.addExact(40, 2)
        if answer != 42:
            return f"the JVM gateway answers out of turn ({answer!r} for 40 + 2)"
    except Exception as exc:  # any failure to get an answer means the same: unusable
        return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}".rstrip(": ")
    return None


def discard_session() -> None:
    """Forget the process's session whatever state it is in, so the next :func:`get_session` builds a new
    one: stop what still stops; keep the JVM when its gateway still answers (a stopped context), else end
    it too (an unusable gateway cannot be repaired: py4j has no way to resynchronise a connection that
    lost its place), and the next session starts a new JVM."""
    global _session
    from pyspark import SparkContext

    with _lock:
        session, _session = _session, None
        if session is not None:
            with contextlib.suppress(Exception):
                session.stop()
        gateway = SparkContext._gateway
        jvm_kept = gateway is not None and _answers(gateway)
        if gateway is not None and not jvm_kept:
            with contextlib.suppress(Exception):
                gateway.shutdown()
            proc = getattr(gateway, "proc", None)
            if proc is not None:
                with contextlib.suppress(Exception):
                    proc.kill()
                    proc.wait(30)
            SparkContext._gateway = None
            SparkContext._jvm = None
        SparkContext._active_spark_context = None
        SparkSession._instantiatedSession = None
        SparkSession._activeSession = None
    log.warning("spark.session_discarded", had_session=session is not None, jvm_kept=jvm_kept)


def _answers(gateway: Any) -> bool:
    try:
        return bool(gateway.jvm.java.lang.Math.addExact(40, 2) == 42
                    and gateway.jvm.java.lang.Math.addExact(41, 2) == 43)
    except Exception:  # no answer at all: the JVM or its connection is gone
        return False


def package_zip(directory: Path) -> Path:
    """A zip of the wormhole package (named by a hash of its sources, so it is built once per version)."""
    root = Path(wormhole.__file__).resolve().parent
    files = sorted(p for p in root.rglob("*.py") if "__pycache__" not in p.parts)
    digest = hashlib.sha256()
    for path in files:
        digest.update(str(path.relative_to(root)).encode())
        digest.update(path.read_bytes())
    target = directory / f"wormhole-{wormhole.__version__}-{digest.hexdigest()[:12]}.zip"
    if not target.exists():
        directory.mkdir(parents=True, exist_ok=True)
        tmp = target.with_suffix(f".{os.getpid()}.tmp")
        with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as zf:
            for path in files:
                zf.write(path, Path("wormhole") / path.relative_to(root))
        os.replace(tmp, target)
    return target


def _log4j_file(directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "log4j2.properties"
    if not path.exists() or path.read_text() != _LOG4J:
        path.write_text(_LOG4J)
    return path
