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
from wormhole.exchange import StorageManager
from wormhole.monitor import MonitorManager
from wormhole.plugins.base import ReadContext
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

    def stop(self, reason: str) -> None:
        """Ask a running task to stop: reading ends, writers are released, everything rolls back."""
        if self._stop_reason is None:
            self._stop_reason = reason
        self._stop.set()
        if self._monitor is not None:
            self._monitor.notify()

    def run(self) -> RunResult:
        conf, spec = self._conf, self._spec
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

        def source_over_limit() -> str | None:
            rejected = dirty.count("source")
            if source_limit.record is not None and rejected > source_limit.record:
                return f"the source rejected {rejected} rows, over the record limit of {source_limit.record}"
            return None

        abort_reason: str | None = None
        read_error: str | None = None
        try:
            readers.prepare()
            readers.split(channels)
        except Exception as exc:
            read_error = describe(exc)
            abort_reason = f"read side failed: {read_error}"
            self._log.error("reader.failed", error=read_error, error_code=getattr(exc, "code", None))
        else:
            assert readers.schema is not None
            if not self._stop.is_set():
                writers.prepare(readers.schema)
            if self._stop.is_set():
                abort_reason = self._stop_reason
            elif not writers.all_failed():
                writers.start()
                readers.start(storage.for_reader(), channels)
                abort_reason = monitor.watch(readers, writers, storage, self._stop, lambda: self._stop_reason,
                                             source_over_limit)
        finally:
            readers.stop.set()
            if abort_reason is not None:
                writers.abort(abort_reason)
            deadline = time.monotonic() + conf.timeouts.shutdown_s
            if not (readers.join(deadline) and writers.join(deadline)):
                self._log.warning("engine.threads_still_running", waited_s=conf.timeouts.shutdown_s)
            writers.poll()
        if abort_reason is None:
            abort_reason = self._source_percentage(dirty.count("source"), monitor.rows_read, source_limit)
        if readers.error is not None and read_error is None and not writers.all_failed():
            read_error = describe(readers.error)
        writers.finalize(readers.rows_sent, abort_reason)
        dirty.close()
        return self._result(started_at, t0, monitor, readers, writers, dirty, abort_reason, read_error, channels)

    @staticmethod
    def _source_percentage(rejected: int, rows_read: int, limit: Any) -> str | None:
        total = rejected + rows_read
        if limit.percentage is not None and total and rejected / total > limit.percentage:
            return (f"the source rejected {rejected} of {total} rows ({rejected / total:.4%}), over the "
                    f"percentage limit of {limit.percentage:.4%}")
        return None

    def _result(self, started_at: str, t0: float, monitor: MonitorManager, readers: ReaderManager,
                writers: WriterManager, dirty: DirtyFile, abort_reason: str | None, read_error: str | None,
                channels: int) -> RunResult:
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
            "engine": "local", "consistency": self._spec.settings.consistency,
            "started_at": started_at, "finished_at": _now(), "duration_s": duration,
            "interrupted": interrupted,
            "source": {"plugin": self._spec.source.plugin, "rows_read": monitor.rows_read,
                       "rows_rejected": dirty.count("source"), "splits": len(readers.splits),
                       "channels": channels, "estimated_rows": monitor.estimated_rows, "error": read_error},
            "destinations": destinations,
            "dirty_file": str(dirty.path) if dirty.counts else None,
            "error": error,
        }
        return RunResult(status=status, run_status="interrupted" if interrupted else status,
                         exit_code=exit_code, result=result, error=error)
