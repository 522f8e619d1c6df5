"""Engine: one task run: plan -> read side -> write side -> monitor -> finalize -> result.

The task is already validated (``TaskSpec``) when the Engine gets it. ``run()`` never raises for a
store failure: every outcome becomes a :class:`RunResult` with per-destination statuses and the
exit code of DESIGN §11. ``stop()`` (SIGTERM) makes a running ``run()`` roll back and return.
"""

from __future__ import annotations

import datetime as dt
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from wormhole.config import EngineConf, TaskSpec
from wormhole.dirty import DirtyFile
from wormhole.errors import ConfigError
from wormhole.exchange import StorageManager
from wormhole.monitor import MonitorManager
from wormhole.plugins import registry
from wormhole.plugins.base import ReadContext, SinkRole, SourceInfo, SourceRole
from wormhole.reader_manager import ReaderManager
from wormhole.writer_manager import WriterManager, describe

EXIT_SUCCESS = 0
EXIT_SUCCESS_WITH_REJECTS = 201
EXIT_PARTIAL = 202
EXIT_FAILED = 203
EXIT_BAD_TASK = 204
EXIT_CLAIMED = 205


@dataclass(frozen=True, slots=True)
class RunResult:
    status: Literal["success", "partial", "failed"]
    run_status: str
    """The run row's status: the task status, or ``interrupted`` after a signal."""
    exit_code: int
    result: dict[str, Any]
    error: str | None


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds")


class Engine:
    def __init__(self, conf: EngineConf, spec: TaskSpec, *, task_id: int, run_id: int, log: Any) -> None:
        self._conf = conf
        self._spec = spec
        self._task_id = task_id
        self._run_id = run_id
        self._log = log
        self._stop = threading.Event()
        self._stop_reason: str | None = None
        self._monitor: MonitorManager | None = None
        self._engine = spec.settings.engine if spec.settings.engine != "auto" else "local"
        self._engine_reason = "not chosen yet"
        self._on_stop: Any = None

    def stop(self, reason: str) -> None:
        """Ask a running task to stop: reading ends, writers are released, everything rolls back."""
        if self._stop_reason is None:
            self._stop_reason = reason
        self._stop.set()
        if self._monitor is not None:
            self._monitor.notify()
        if self._on_stop is not None:
            self._on_stop()

    def run(self) -> RunResult:
        conf, spec = self._conf, self._spec
        from wormhole import spark

        spark.configure(conf.spark)
        started_at, t0 = _now(), time.monotonic()
        dirty = DirtyFile(Path(conf.paths.dirty_dir) / f"task-{self._task_id}" / f"run-{self._run_id}.jsonl")
        storage = StorageManager([d.id for d in spec.destinations], conf.exchange)
        monitor = self._monitor = MonitorManager(conf.monitor, self._log)
        ctx = ReadContext(task_id=self._task_id, run_id=self._run_id, batch_rows=conf.exchange.batch_rows,
                          dirty=dirty)
        readers = ReaderManager(spec.source, ctx, conf, monitor, self._log)
        writers = WriterManager(spec, conf, storage, monitor, dirty, self._task_id, self._run_id, self._log)
        channels = spec.settings.speed.channel or conf.reader.channels
        source_limit = spec.settings.error_limit or conf.error_limit
        self._log.info("task.started", source=spec.source.plugin, destinations=[d.id for d in spec.destinations],
                       channels=channels, consistency=spec.settings.consistency)

        source_verdict: list[str] = []  # non-empty once the source went over its record limit

        def source_over_limit() -> str | None:
            rejected = dirty.count("source")
            if source_limit.record is not None and rejected > source_limit.record:
                source_verdict.append("record")
                return f"the source rejected {rejected} rows, over the record limit of {source_limit.record}"
            return None

        abort_reason: str | None = None
        read_error: str | None = None
        execution: Any = None
        try:
            info = readers.prepare()
            self._engine, self._engine_reason = self._choose_engine(info)
            self._log.info("engine.chosen", engine=self._engine, reason=self._engine_reason)
            readers.split(channels)
            schema = readers.schema
            assert schema is not None
            if self._engine == "spark":
                execution = self._spark_execution(ctx, dirty)
                _, schema = execution.source_frame(spec.source, readers.splits, schema)
        except Exception as exc:
            read_error = describe(exc)
            abort_reason = f"read side failed: {read_error}"
            self._log.error("reader.failed", error=read_error, error_code=getattr(exc, "code", None))
        else:
            if not self._stop.is_set():
                writers.prepare(schema)
            if self._stop.is_set():
                abort_reason = self._stop_reason
            elif writers.all_failed():
                pass
            elif execution is not None:
                abort_reason, read_error = self._run_spark(execution, readers, writers, monitor, source_over_limit)
            else:
                writers.start()
                readers.start(storage.for_reader(), channels)
                abort_reason = monitor.watch(readers, writers, storage, self._stop, lambda: self._stop_reason,
                                             source_over_limit)
        finally:
            readers.stop.set()
            if abort_reason is not None:
                writers.abort(abort_reason)
                if execution is not None:
                    execution.cancel(list(writers.destinations))
            deadline = time.monotonic() + conf.timeouts.shutdown_s
            if not (readers.join(deadline) and writers.join(deadline)):
                self._log.warning("engine.threads_still_running", waited_s=conf.timeouts.shutdown_s)
            writers.poll()
            if execution is not None:
                execution.release()
        if source_verdict:
            # The verdict ended the run (the monitor returns on it at once). Readers still running
            # then may have rejected more rows before they stopped: name the final count, the one
            # in the result and in the dirty file.
            abort_reason = source_over_limit() or abort_reason
        if abort_reason is None:
            abort_reason = self._source_percentage(dirty.count("source"), monitor.rows_read, source_limit)
        if readers.error is not None and read_error is None and not writers.all_failed():
            read_error = describe(readers.error)
        rows_sent = monitor.rows_read if execution is not None else readers.rows_sent
        writers.finalize(rows_sent, abort_reason)
        dirty.close()
        return self._result(started_at, t0, monitor, readers, writers, dirty, abort_reason, read_error, channels,
                            execution.describe() if execution is not None else None)

    def _choose_engine(self, info: SourceInfo | None) -> tuple[str, str]:
        """Where the partitions run, and why (logged and stored in the result)."""
        setting = self._spec.settings.engine
        if setting != "auto":
            return setting, f"settings.engine is {setting!r}"
        needs = [f"source {self._spec.source.plugin!r}"] if _source_role(self._spec).spark_only else []
        needs += [f"destination {d.id!r} ({d.plugin})" for d in self._spec.destinations
                  if _sink_role(d.plugin).needs_spark]
        if needs:
            return "spark", f"{', '.join(needs)} needs Spark"
        threshold = self._conf.spark.auto_rows
        estimate = info.estimated_rows if info is not None else None
        if estimate is None:
            return "local", "the source gave no row estimate"
        if estimate <= threshold:
            return "local", f"estimated {estimate} rows <= spark.auto_rows {threshold}"
        from wormhole import spark

        if not spark.available():
            return "local", f"estimated {estimate} rows > spark.auto_rows {threshold}, but pyspark is not installed"
        return "spark", f"estimated {estimate} rows > spark.auto_rows {threshold}"

    def _spark_execution(self, ctx: ReadContext, dirty: DirtyFile) -> Any:
        from wormhole import spark

        if not spark.available():
            raise ConfigError("settings.engine 'spark' needs pyspark: pip install 'wormhole[spark]'")
        from wormhole.spark.runner import SparkExecution

        execution = SparkExecution(self._conf, ctx, dirty, self._log)
        ids = [d.id for d in self._spec.destinations]
        # stop() may run in a signal handler on the thread that is waiting in a Py4J call: cancel
        # from another thread, never re-entering that call's connection.
        self._on_stop = lambda: threading.Thread(target=execution.cancel, args=(ids,), daemon=True,
                                                 name="spark-cancel").start()
        return execution

    def _run_spark(self, execution: Any, readers: ReaderManager, writers: WriterManager, monitor: MonitorManager,
                   source_over_limit: Any) -> tuple[str | None, str | None]:
        """Read the source once on Spark, then one Spark job per destination; (abort reason, read error)."""
        try:
            rows = execution.read()
        except Exception as exc:
            from wormhole.spark.session import describe_spark_error

            if self._stop.is_set():
                return self._stop_reason, None
            error = describe_spark_error(exc)
            self._log.error("reader.failed", error=error, error_code=getattr(exc, "code", "READ_ERROR"))
            return f"read side failed: {error}", error
        counters = monitor.new_reader_monitor()
        counters.rows, counters.splits = rows, len(readers.splits)
        self._log.info("reader.finished", rows=rows, elapsed_s=monitor.elapsed_s)
        over = source_over_limit()
        if over:
            return over, None
        writers.start_jobs(lambda dest, c: execution.write(dest, c, rows), rows)
        return monitor.watch_writers(writers, self._stop, lambda: self._stop_reason, execution.progress), None

    @staticmethod
    def _source_percentage(rejected: int, rows_read: int, limit: Any) -> str | None:
        total = rejected + rows_read
        if limit.percentage is not None and total and rejected / total > limit.percentage:
            return (f"the source rejected {rejected} of {total} rows ({rejected / total:.4%}), over the "
                    f"percentage limit of {limit.percentage:.4%}")
        return None

    def _result(self, started_at: str, t0: float, monitor: MonitorManager, readers: ReaderManager,
                writers: WriterManager, dirty: DirtyFile, abort_reason: str | None, read_error: str | None,
                channels: int, spark: dict[str, Any] | None) -> RunResult:
        destinations: dict[str, Any] = {}
        for dest in writers.destinations.values():
            totals = monitor.writer_totals(dest.id)
            end = dest.finished or time.monotonic()
            destinations[dest.id] = {
                "plugin": dest.plugin, "status": dest.outcome, "rows_delivered": totals.delivered,
                "rows_written": totals.written, "rows_rejected": totals.rejected, "bytes": totals.bytes,
                "duration_s": round(end - dest.started, 3),
                "rolled_back": dest.outcome != "success" and dest.periphery is not None
                and dest.rollback_error is None,
                "rollback_error": dest.rollback_error, "error": dest.error, "error_code": dest.error_code,
            }
        outcomes = [d["status"] for d in destinations.values()]
        interrupted = self._stop_reason is not None
        if outcomes and all(o == "success" for o in outcomes):
            status: Literal["success", "partial", "failed"] = "success"
            rejected = any(d["rows_rejected"] for d in destinations.values()) or dirty.count("source") > 0
            exit_code = EXIT_SUCCESS_WITH_REJECTS if rejected else EXIT_SUCCESS
        elif "success" in outcomes:
            status, exit_code = "partial", EXIT_PARTIAL
        else:
            status, exit_code = "failed", EXIT_FAILED
        errors = [f"{k}: {v['error']}" for k, v in destinations.items() if v["error"] and v["status"] == "failed"]
        error = abort_reason or ("; ".join(errors) if errors else None)
        duration = round(time.monotonic() - t0, 3)
        result = {
            "task_id": self._task_id, "run_id": self._run_id, "status": status, "exit_code": exit_code,
            "engine": self._engine, "engine_reason": self._engine_reason,
            "consistency": self._spec.settings.consistency,
            "started_at": started_at, "finished_at": _now(), "duration_s": duration,
            "interrupted": interrupted,
            "source": {"plugin": self._spec.source.plugin, "rows_read": monitor.rows_read,
                       "rows_rejected": dirty.count("source"), "splits": len(readers.splits),
                       "channels": channels, "estimated_rows": monitor.estimated_rows, "error": read_error},
            "destinations": destinations,
            "dirty_file": str(dirty.path) if dirty.counts else None,
            **({"spark": spark} if spark is not None else {}),
            "error": error,
        }
        return RunResult(status=status, run_status="interrupted" if interrupted else status,
                         exit_code=exit_code, result=result, error=error)


def _source_role(spec: TaskSpec) -> SourceRole:
    role = registry.get(spec.source.plugin).source
    assert role is not None  # validated with the task
    return role


def _sink_role(plugin: str) -> SinkRole:
    role = registry.get(plugin).sink
    assert role is not None
    return role
