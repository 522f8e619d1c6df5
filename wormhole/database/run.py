"""The run of a database task: one table run per table, each read once and fanned out, several at a time.

1. :func:`expand`, before anything is written: the source's catalog lists the tables the patterns select and
   describes each; every destination's target templates are rendered per table (two tables on one target
   refuse the task) and, where the destination creates its tables, the DDL is translated (a type with no
   exact mapping refuses the task, naming ``table.column``).
2. The tables are created where missing (a table that exists and differs fails that (table, destination)
   pair alone).
3. The table runs: each is an :class:`~wormhole.engine.Engine` of one table with the task's destinations
   as *pairs* (``dest/schema.table``: markers, checkpoints and results keep them apart) and its split ids
   scoped by the table (``schema.table#id``). The largest tables start first; each gets channels in
   proportion to its share of the rows (at least one) out of the task's channel count, and a table starts
   when its channels are free, so small tables fill the channels beside the large ones. The task's speed
   limits are shared out the same way.
4. After a table's run, each pair that committed gets its indexes and sequences; after every table, the
   foreign keys (``settings.foreign_keys``).

A pair that fails stops neither its table in the other destinations nor the other tables in its
destination. The result has a destination entry per pair and a ``database`` section per table.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from typing import Any

from wormhole.config import EngineConf
from wormhole.database.checkpoints import SharedCheckpoints
from wormhole.database.ddl import TargetName
from wormhole.database.ddl_steps import absent_targets
from wormhole.database.expand import SLOTS_PER_CHANNEL, DatabasePlan, TableJob, expand, pair_id
from wormhole.database.progress import DatabaseProgress
from wormhole.database.report import RunFacts, TableOutcome, database_result, pair_failed
from wormhole.database.snapshot import Snapshot
from wormhole.engine import Engine
from wormhole.errors import InvalidTaskConfig
from wormhole.log import Logger
from wormhole.monitor import ProgressListener
from wormhole.plugins import registry
from wormhole.plugins.base import ReadContext, Rejected, SourceInfo
from wormhole.plugins.shared import RunShared
from wormhole.pool import spawn
from wormhole.recovery.checkpoint import CheckpointStore
from wormhole.recovery.lease import Lease
from wormhole.result import (
    RunResult,
)
from wormhole.run_parts import now
from wormhole.task_spec import TaskSpec
from wormhole.writer_manager import describe


class DatabaseRun:
    """A database task's run, with the Engine's interface (``run``, ``stop``, ``abandon``, ``release``)."""

    def __init__(self, conf: EngineConf, spec: TaskSpec, *, task_id: int, run_id: int, log: Logger,
                 listeners: Sequence[ProgressListener] = (), checkpoints: CheckpointStore | None = None,
                 resume_from: int | None = None, lease: Lease | None = None, taskdb_id: str = "",
                 finished_runs: frozenset[int] = frozenset()) -> None:
        self._conf, self._spec, self._log = conf, spec, log
        self._task_id, self._run_id = task_id, run_id
        self._listeners = tuple(listeners)
        self._shared_checkpoints = SharedCheckpoints(checkpoints) if checkpoints is not None else None
        self._checkpoints: Any = self._shared_checkpoints
        self._resume_from, self._lease, self._taskdb_id, self._finished = resume_from, lease, taskdb_id, finished_runs
        self._stop = threading.Event()
        self._stop_reason: str | None = None
        self._abandoned = False
        self._lock = threading.Condition()
        self._running: dict[str, Engine] = {}
        self._engines: list[Engine] = []
        self._alone: set[int] = set()
        """The table runs (by id) that write a resource one at a time (a sqlite file): released in one lane."""
        self._snapshot: Snapshot | None = None
        self._absent: set[tuple[str, TargetName]] = set()
        """(destination, target) of the targets that were not there when the table runs started."""
        self._shared = RunShared()
        """What the table runs share: facts asked once, idle sessions lent from one step to the next."""
        self._progress = DatabaseProgress(self._listeners, task_id=task_id, source=spec.source.plugin,
                                          destinations={}, tables=0, estimated_rows=None)

    # -- the Engine's interface -----------------------------------------------------------------------

    def stopped(self, wait_s: float = 0.0) -> bool:
        return self._stop.wait(wait_s)

    def stop(self, reason: str) -> None:
        with self._lock:
            if self._stop_reason is None:
                self._stop_reason = reason
            self._stop.set()
            running = list(self._running.values())
            self._lock.notify_all()
        if self._lease is not None:
            self._lease.stop()
        for engine in running:
            engine.stop(reason)

    def abandon(self, reason: str) -> None:
        self._abandoned = True
        with self._lock:
            running = list(self._running.values())
        for engine in running:
            engine.abandon(reason)
        if self._lease is not None:
            self._lease.lose()
        self.stop(reason)

    def release(self) -> None:
        if self._abandoned:
            return
        self._shared.reopen()  # the releases of one destination reuse a session
        # A few at a time (a table's release is a round trip or two): each lane takes every n-th table, and
        # the tables that write a file one at a time stay in the first lane, one after another.
        alone = [e for e in self._engines if id(e) in self._alone]
        others = [e for e in self._engines if id(e) not in self._alone]
        lanes = max(1, min(RELEASE_LANES, len(others)))
        try:
            futures = [spawn(_release_each, [*(alone if lane == 0 else ()), *others[lane::lanes]],
                             name=f"release-{lane}") for lane in range(lanes)]
            errors = [f.exception() for f in futures]
            errors += self._shared.release_now()  # what the stores left to do at once (a markers table's DELETE)
        finally:
            self._shared.close()
        first = next((e for e in errors if e is not None), None)
        if first is not None:
            raise first

    def run(self) -> RunResult:
        t0, started_at = time.monotonic(), now()
        self._log.info("task.started", source=self._spec.source.plugin, database=True,
                       tables=list(self._spec.source.tables or ()),
                       destinations=[d.id for d in self._spec.destinations])
        try:
            plan = expand(self._spec, self._conf, self._log, self._task_id)
        except InvalidTaskConfig as exc:
            self._log.error("task.invalid", problems=exc.problems, error_code=exc.code)
            return self._ended(t0, started_at, None, [], error=str(exc), exit_code=exc.exit_code)
        except Exception as exc:
            error = describe(exc)
            self._log.error("reader.failed", error=error, error_code=getattr(exc, "code", None))
            return self._ended(t0, started_at, None, [], error=f"read side failed: {error}", read_error=error)
        self._log.info("database.plan_made", **plan.to_dict())
        try:
            self._snapshot = self._open_snapshot(plan)
        except Exception as exc:  # not taken: nothing was touched
            error = describe(exc)
            self._log.error("reader.failed", error=error, error_code=getattr(exc, "code", None))
            return self._ended(t0, started_at, plan, [], error=f"read side failed: {error}", read_error=error)
        try:
            self._describe_ahead(plan)
            return self._run_tables(t0, started_at, plan)
        finally:
            if self._snapshot is not None:
                self._snapshot.close()
            self._shared.close()
            grouped = self._shared_checkpoints
            if grouped is not None:
                grouped.close()
            self._log.info("database.sessions", **self._shared.counts,
                           checkpoint_writes=grouped.writes if grouped else 0,
                           checkpoint_commits=grouped.groups if grouped else 0)

    def _open_snapshot(self, plan: DatabasePlan) -> Snapshot | None:
        """One snapshot for every table (``settings.snapshot: consistent``), with a connection for each reader
        that can run at once."""
        settings = self._spec.settings
        if settings.snapshot != "consistent":
            return None
        facet = registry.source(self._spec.source.plugin).catalog
        assert facet is not None  # expand() found it
        source = dataclasses.replace(self._spec.source, options=facet.for_tables(
            self._spec.source.options, [j.ref for j in plan.jobs]))
        ctx = ReadContext(task_id=self._task_id, run_id=self._run_id, batch_rows=self._conf.exchange.batch_rows,
                          dirty=_NoRows(), plugin=source.plugin, stop=self._stop)
        snapshot = Snapshot.open(source, ctx, readers=plan.channels * SLOTS_PER_CHANNEL,
                                 lock_timeout_s=settings.snapshot_lock_timeout_s, log=self._log)
        if self._resume_from is not None:
            self._log.info("snapshot.new_on_resume", resumed_from_run=self._resume_from)
        return snapshot

    def _describe_ahead(self, plan: DatabasePlan) -> None:
        """Every table's columns described at once, where its store can (after the snapshot, as each table run
        would have described its own); failing, each table run describes its own as before."""
        facet = registry.source(self._spec.source.plugin).catalog
        if facet is None or facet.describe_ahead is None or not plan.jobs:
            return
        ctx = ReadContext(task_id=self._task_id, run_id=self._run_id, batch_rows=self._conf.exchange.batch_rows,
                          dirty=_NoRows(), plugin=self._spec.source.plugin, stop=self._stop, shared=self._shared)
        try:
            described = facet.describe_ahead(facet.for_tables(self._spec.source.options, [j.ref for j in plan.jobs]),
                                             ctx)
        except Exception as exc:
            self._log.warning("database.describe_ahead_failed", error=describe(exc))
            return
        self._log.debug("database.described", tables=described)

    def _run_tables(self, t0: float, started_at: str, plan: DatabasePlan) -> RunResult:
        outcomes = [TableOutcome(job) for job in plan.jobs]
        self._progress = DatabaseProgress(
            self._listeners, task_id=self._task_id, source=self._spec.source.plugin,
            destinations={d.id: d.plugin for d in self._spec.destinations}, tables=len(plan.jobs),
            estimated_rows=sum(j.listed.estimated_rows for j in plan.jobs))
        # Which targets are not there yet, asked once per destination database, not once per table.
        self._absent = absent_targets([p for job in plan.jobs for p in job.ddl.values()], self._shared)
        self._schedule(plan, outcomes)
        if not self._stop.is_set():
            self._foreign_keys(outcomes)
        result = self._ended(t0, started_at, plan, outcomes)
        self._progress.finish(result.run_status, _by_destination(result.result.get("database") or {}))
        return result

    # -- the table runs ---------------------------------------------------------------------------------

    def _schedule(self, plan: DatabasePlan, outcomes: list[TableOutcome]) -> None:
        """Start each table when its channel slots are free and no running table writes a resource it writes
        alone (a sqlite file), until every table has run or the task is stopped. Among the tables that can
        start, the one whose database or schema has the fewest tables running goes first, then the largest
        (DataX's assignFairly over resource marks, across tables)."""
        pending = list(outcomes)
        waiting = Counter(o.job.ref.schema for o in pending)
        # The pending tables' slots: while fewer are free than the fewest any needs, none is looked at (a scan
        # of the pending tables after each start, when none could, made 1,000 tables a million checks).
        needs = Counter(o.job.slots for o in pending)
        capacity = free = plan.channels * SLOTS_PER_CHANNEL
        held: set[str] = set()
        running: Counter[str] = Counter()
        tables: list[Future[None]] = []

        def done(outcome: TableOutcome) -> None:
            nonlocal free
            with self._lock:
                free += outcome.job.slots
                held.difference_update(outcome.job.exclusive)
                running[outcome.job.ref.schema] -= 1
                self._lock.notify_all()

        def startable(o: TableOutcome) -> bool:
            return (o.job.slots <= free or free == capacity) and not (o.job.exclusive & held)

        with self._lock:
            while pending and not self._stop.is_set():
                fits = free == capacity or free >= min(n for n, count in needs.items() if count)
                chosen = _first_startable(pending, running, waiting, startable) if fits else None
                if chosen is None:
                    self._lock.wait()
                    continue
                pending.remove(chosen)
                waiting[chosen.job.ref.schema] -= 1
                needs[chosen.job.slots] -= 1
                free -= chosen.job.slots
                held.update(chosen.job.exclusive)
                running[chosen.job.ref.schema] += 1
                tables.append(spawn(self._table, chosen, done, name=f"table-{chosen.job.ref.key}"[:60]))
        for table in tables:
            table.exception()  # (its own errors it has recorded as its pairs' outcomes)

    def _table(self, outcome: TableOutcome, done: Callable[[TableOutcome], None]) -> None:
        job = outcome.job
        log = self._log.bind(table=job.ref.key)
        try:
            spec = self._prepare_ddl(outcome, log)
            if spec is None or self._stop.is_set():
                return
            engine = Engine(self._conf, spec, task_id=self._task_id, run_id=self._run_id, log=_table_log(log),
                            listeners=[self._progress.listener(job.ref.key)], checkpoints=self._checkpoints,
                            resume_from=self._resume_from,
                            lease=self._lease, taskdb_id=self._taskdb_id, finished_runs=self._finished,
                            scope=job.ref.key, snapshot=self._snapshot, shared=self._shared,
                            known=_estimate(job))
            with self._lock:
                if self._stop.is_set():
                    return
                self._running[job.ref.key] = engine
                self._engines.append(engine)
                if job.exclusive:
                    self._alone.add(id(engine))
            try:
                outcome.result = engine.run()
            finally:
                with self._lock:
                    self._running.pop(job.ref.key, None)
            self._after_load(outcome, log)
        except Exception as exc:  # a bug of ours in one table: its pairs fail, the other tables go on
            log.exception("database.table_crashed", error=str(exc))
            for d in self._spec.destinations:
                pid = pair_id(d.id, job.ref)
                if outcome.result is None or pid not in outcome.result.report.destinations:
                    outcome.pairs[pid] = pair_failed(d.plugin, f"internal error: {type(exc).__name__}: {exc}")
        finally:
            self._log_pairs(outcome)
            done(outcome)

    def _prepare_ddl(self, outcome: TableOutcome, log: Logger) -> TaskSpec | None:
        """Create the table where a destination creates its tables; the table run's task without the pairs
        whose DDL failed (None: no pair is left)."""
        job = outcome.job
        failed: set[str] = set()
        for dest_id, ddl in job.ddl.items():
            try:
                outcome.ddl[dest_id] = ddl.create(log, self._shared, absent=(dest_id, ddl.ddl.target) in self._absent)
            except Exception as exc:
                error = describe(exc)
                log.error("database.ddl_failed", destination=dest_id, target=job.targets[dest_id], error=error)
                plugin = next(d.plugin for d in self._spec.destinations if d.id == dest_id)
                outcome.pairs[pair_id(dest_id, job.ref)] = pair_failed(plugin, f"creating {job.targets[dest_id]}: "
                                                                                f"{error}")
                failed.add(pair_id(dest_id, job.ref))
        if not failed:
            return job.spec
        kept = tuple(d for d in job.spec.destinations if d.id not in failed)
        return dataclasses.replace(job.spec, destinations=kept) if kept else None

    def _after_load(self, outcome: TableOutcome, log: Logger) -> None:
        """The indexes and sequences of each pair that committed (a failure fails the pair: its rows stay
        committed, and the result says so)."""
        job, result = outcome.job, outcome.result
        if result is None:
            return
        # A table this run found there (not created) is left as it is, unless this run continues earlier runs
        # of the task (a resume, a retry), which may have created it: then what is there already is kept.
        continues = self._resume_from is not None or bool(self._finished)
        for dest_id, ddl in job.ddl.items():
            pid = pair_id(dest_id, job.ref)
            pair = result.report.destinations.get(pid)
            if pair is None or pair.status != "success" or pair.skipped:  # skipped: its run made them
                continue
            if outcome.ddl.get(dest_id) != "created" and not continues:
                continue
            try:
                done = ddl.after_load(log, self._shared, created=outcome.ddl.get(dest_id) == "created")
            except Exception as exc:
                error = describe(exc)
                log.error("database.index_failed", destination=dest_id, target=job.targets[dest_id], error=error)
                outcome.pairs[pid] = dataclasses.replace(
                    pair, status="failed", error=f"rows committed, but after the load: {error}")
                continue
            if done:
                outcome.ddl[dest_id] = f"{outcome.ddl.get(dest_id, 'exists')}, {done}"

    def _foreign_keys(self, outcomes: list[TableOutcome]) -> None:
        if not self._spec.settings.foreign_keys:
            return
        continues = self._resume_from is not None or bool(self._finished)
        for outcome in outcomes:
            job = outcome.job
            for dest_id, ddl in job.ddl.items():
                pid = pair_id(dest_id, job.ref)
                pair = outcome.all_pairs().get(pid)
                if pair is None or pair.status != "success" or pair.skipped:
                    continue
                if outcome.ddl.get(dest_id, "").split(",")[0] != "created" and not continues:
                    continue  # a table found there is left as it is (see _after_load)
                try:
                    done = ddl.foreign_keys(self._log.bind(table=job.ref.key), self._shared)
                except Exception as exc:
                    error = describe(exc)
                    self._log.error("database.foreign_key_failed", table=job.ref.key, destination=dest_id,
                                    error=error)
                    outcome.pairs[pid] = dataclasses.replace(
                        pair, status="failed", error=f"rows committed, but its foreign keys: {error}")
                    continue
                if done:
                    outcome.ddl[dest_id] = f"{outcome.ddl.get(dest_id, 'exists')}, {done}"

    def _log_pairs(self, outcome: TableOutcome) -> None:
        for pid, pair in outcome.all_pairs().items():
            self._log.info("database.pair_done", pair=pid, table=outcome.job.ref.key, status=pair.status,
                           rows_written=pair.rows_written, rows_rejected=pair.rows_rejected, error=pair.error)

    def _ended(self, t0: float, started_at: str, plan: DatabasePlan | None, outcomes: list[TableOutcome], *,
               error: str | None = None, exit_code: int | None = None, read_error: str | None = None) -> RunResult:
        return database_result(RunFacts(
            spec=self._spec, task_id=self._task_id, run_id=self._run_id, t0=t0, started_at=started_at,
            stop_reason=self._stop_reason, resume_from=self._resume_from,
            snapshot=None if self._snapshot is None else self._snapshot.describe(
                resumed=self._resume_from is not None)), plan, outcomes,
            error=error, exit_code=exit_code, read_error=read_error)


def _first_startable(pending: Sequence[TableOutcome], running: Counter[str], waiting: Counter[str],
                     startable: Callable[[TableOutcome], bool]) -> TableOutcome | None:
    """Of the tables that can start, the first (largest) of those whose schema has the fewest tables running;
    the scan stops at the first that can start in a schema with no fewer running than any waiting schema
    (with 1,000 tables, scanning them all on every start costs a million checks)."""
    lowest = min((running[s] for s, n in waiting.items() if n > 0), default=0)
    best: TableOutcome | None = None
    for o in pending:
        if not startable(o):
            continue
        count = running[o.job.ref.schema]
        if count <= lowest:
            return o
        if best is None or count < running[best.job.ref.schema]:
            best = o
    return best


RELEASE_LANES = 4
"""Threads releasing the table runs' destination records once the task's outcome is recorded."""


def _release_each(engines: Sequence[Engine]) -> None:
    for engine in engines:
        engine.release()


def _by_destination(section: Mapping[str, Any]) -> dict[str, str]:
    """Each destination's outcome over its tables: success, failed, or partial when some tables committed."""
    states: dict[str, set[str | None]] = {}
    for table in section.get("table_results", []):
        for dest, pair in table["destinations"].items():
            states.setdefault(dest, set()).add(pair["status"])
    return {d: "success" if s == {"success"} else "partial" if "success" in s else "failed" for d, s in states.items()}


def _estimate(job: TableJob) -> SourceInfo | None:
    """The table's rows as the catalog estimated them, when that is what the source's periphery would answer
    (its ``estimate`` is ``stats``: the same statistics); None: the table run asks its source."""
    if getattr(job.spec.source.options, "estimate", None) != "stats":
        return None
    return SourceInfo(estimated_rows=job.listed.estimated_rows, estimated_bytes=None)


def _table_log(log: Logger) -> Logger:
    """A table run's logger: its routine info events at debug (:data:`~wormhole.plugins.shared.ROUTINE`)."""
    return RunShared.quiet(log)  # type: ignore[no-any-return]


class _NoRows:
    """Taking the snapshot reads no row, so it rejects none."""

    def reject(self, origin: str, rows: Sequence[Rejected], split_id: str | None = None) -> None:
        raise AssertionError("taking a snapshot rejected a row")
