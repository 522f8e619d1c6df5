"""Recurring tasks: ``settings.schedule``, a cron expression read by croniter, and its ticks.

Five fields (minute hour day month weekday) or six, the sixth being seconds (croniter's order: ``* * * *
* */5`` is every five seconds). Times are naive UTC, like every timestamp of the task database.

A task's row keeps its schedule and ``next_run_at``, the tick it waits for. A daemon claims it once that
tick has passed, for the latest tick not after now (:func:`due_tick`): ticks missed while no daemon ran,
or while the previous run was still running, collapse into that one run.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from croniter import CroniterError, croniter

__all__ = ["due_tick", "next_tick", "next_wait", "schedule_problem"]

_EPSILON = timedelta(microseconds=1)


def schedule_problem(expr: str) -> str | None:
    """Why ``expr`` is not a cron expression wormhole accepts, or None."""
    fields = expr.split()
    if len(fields) not in (5, 6):
        return (f"{expr!r} is not a cron expression: expected 5 fields (minute hour day month weekday) or 6 "
                "(the sixth is seconds)")
    try:
        croniter(expr, _naive(datetime.now(UTC)))
    except (CroniterError, ValueError, KeyError) as exc:  # croniter raises KeyError for some bad names
        return f"{expr!r} is not a cron expression: {exc}"
    return None


def next_tick(expr: str, after: datetime) -> datetime:
    """The first tick strictly after ``after``."""
    return croniter(expr, _naive(after)).get_next(datetime)  # type: ignore[no-any-return]


def due_tick(expr: str, waited_for: datetime, now: datetime, last_tick: datetime | None = None) -> datetime:
    """The tick a run claimed at ``now`` stands for. ``waited_for`` (the row's ``next_run_at``) equal to
    ``last_tick`` (its ``tick_at``) is a tick to redo (its run was interrupted or crashed): that tick.
    Else the latest tick not after ``now`` (the missed ones collapse into it), never one before
    ``waited_for``."""
    waited_for = _naive(waited_for)
    if last_tick is not None and _naive(last_tick) == waited_for:
        return waited_for
    try:
        latest: datetime = croniter(expr, _naive(now) + _EPSILON).get_prev(datetime)
    except (CroniterError, ValueError, KeyError):  # a row an upstream system edited: its run fails with a 204
        return waited_for
    return max(waited_for, latest)


def next_wait(expr: str, tick: datetime | None, *, redo: bool, now: datetime) -> datetime:
    """The tick a recurring task waits for once a run for ``tick`` (None: a run no tick started) ended:
    the tick itself again when the run must be redone (it was interrupted), else the next one after it,
    which may have passed already (the run took longer than the schedule's period: the next run starts at
    once, for the latest of the ticks it missed)."""
    if tick is None:
        return next_tick(expr, now)
    return _naive(tick) if redo else next_tick(expr, tick)


def _naive(at: datetime) -> datetime:
    return at.astimezone(UTC).replace(tzinfo=None) if at.tzinfo is not None else at
