"""Recurring tasks without a daemon: cron parsing (a 204 naming settings.schedule), the next tick, missed
ticks collapsing into one run, and the task store's scheduled rows (SQLite), all on a fixed clock."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from wormhole.errors import InvalidTaskConfig
from wormhole.schedule import due_tick, next_tick, next_wait
from wormhole.task_spec import TaskSpec
from wormhole.taskdb import SqlTaskStore, open_store
from wormhole.variables import values_for_run

EVERY_2S = "* * * * * */2"
T0 = datetime(2026, 3, 1, 12, 0, 0)


def spec(schedule: Any) -> dict[str, Any]:
    return {"source": {"plugin": "stream", "params": {"rows": 1}},
            "destinations": [{"id": "s", "plugin": "stream"}], "settings": {"schedule": schedule}}


@pytest.mark.parametrize(("schedule", "why"), [
    ("61 * * * *", "out of range"),
    ("* * *", "expected 5 fields"),
    ("* * * * * * * *", "expected 5 fields"),
    ("every day", "expected 5 fields"),
    ("* * * * blursday", "not a cron expression"),
])
def test_a_bad_cron_expression_is_a_204_naming_settings_schedule(schedule: str, why: str) -> None:
    with pytest.raises(InvalidTaskConfig) as info:
        TaskSpec.from_mapping(spec(schedule))
    assert info.value.exit_code == 204
    assert len(info.value.problems) == 1
    assert info.value.problems[0].startswith("settings.schedule: ")
    assert why in info.value.problems[0]


def test_a_schedule_must_be_text() -> None:
    with pytest.raises(InvalidTaskConfig) as info:
        TaskSpec.from_mapping(spec(5))
    assert info.value.problems[0].startswith("settings.schedule")


def test_five_and_six_field_schedules_are_accepted() -> None:
    assert TaskSpec.from_mapping(spec("*/5 * * * *")).settings.schedule == "*/5 * * * *"
    assert TaskSpec.from_mapping(spec(EVERY_2S)).settings.schedule == EVERY_2S
    assert TaskSpec.from_mapping(spec(None)).settings.schedule is None


def test_next_tick_is_strictly_after() -> None:
    assert next_tick("*/5 * * * *", T0) == T0 + timedelta(minutes=5)
    assert next_tick("*/5 * * * *", T0 + timedelta(seconds=1)) == T0 + timedelta(minutes=5)
    assert next_tick(EVERY_2S, T0) == T0 + timedelta(seconds=2)  # the sixth field is seconds
    assert next_tick("0 2 * * *", T0) == datetime(2026, 3, 2, 2, 0)


def test_missed_ticks_collapse_into_the_latest() -> None:
    # The row waited for 12:05; no daemon ran until 13:17:30: one run, for 13:15.
    now = datetime(2026, 3, 1, 13, 17, 30)
    assert due_tick("*/5 * * * *", T0 + timedelta(minutes=5), now) == datetime(2026, 3, 1, 13, 15)
    # Exactly on a tick: that tick.
    assert due_tick("*/5 * * * *", T0, T0 + timedelta(minutes=10)) == T0 + timedelta(minutes=10)
    # Claimed right at its tick: the tick it waited for.
    assert due_tick("*/5 * * * *", T0, T0 + timedelta(milliseconds=3)) == T0


def test_a_tick_to_redo_is_not_collapsed() -> None:
    # The run for 12:00 was interrupted (the row waits for its own tick again): redone for 12:00.
    now = T0 + timedelta(minutes=17)
    assert due_tick("*/5 * * * *", T0, now, last_tick=T0) == T0
    assert due_tick("*/5 * * * *", T0, now, last_tick=T0 - timedelta(minutes=5)) == T0 + timedelta(minutes=15)


def test_next_wait_after_a_run() -> None:
    late = T0 + timedelta(minutes=12)
    # Finished: the tick after the run's own, even if it passed meanwhile (the daemon starts it at once).
    assert next_wait("*/5 * * * *", T0, redo=False, now=late) == T0 + timedelta(minutes=5)
    assert next_wait("*/5 * * * *", T0, redo=True, now=late) == T0
    # A first run no tick started (inserted pending): the first tick after now.
    assert next_wait("*/5 * * * *", None, redo=False, now=late) == T0 + timedelta(minutes=15)


def test_the_tick_is_a_builtin_variable() -> None:
    values = values_for_run(None, None, started=T0 + timedelta(seconds=3), tick=T0)
    assert values["tick_ts"] == "2026-03-01 12:00:00" and values["tick_date"] == "2026-03-01"
    assert values["run_ts"] == "2026-03-01 12:00:03"
    # A resumed run keeps the tick its crashed run recorded.
    resumed = values_for_run(None, '{"tick_ts": "2026-02-28 00:00:00"}', tick=T0)
    assert resumed["tick_ts"] == "2026-02-28 00:00:00"
    # A run no tick started: its start.
    assert values_for_run(None, None, started=T0)["tick_ts"] == "2026-03-01 12:00:00"


def past_tick() -> datetime:
    """Half a minute ago, naive UTC in whole seconds (what a tick is)."""
    return (datetime.now(UTC).replace(tzinfo=None) - timedelta(seconds=30)).replace(microsecond=0)


@pytest.fixture
def store(tmp_path: Path) -> SqlTaskStore:
    s = open_store(f"sqlite:///{tmp_path / 'tasks.db'}", create=True)
    s.init_schema()
    return s


def test_a_scheduled_task_is_due_once_its_tick_passed_and_claimed_once(store: SqlTaskStore) -> None:
    past = past_tick()
    waiting = store.submit("later", "{}", schedule=(EVERY_2S, past + timedelta(hours=1)))
    due = store.submit("now", "{}", schedule=(EVERY_2S, past))
    assert store.get(waiting).status == "scheduled"  # type: ignore[union-attr]
    assert [d[0] for d in store.due(10)] == [due]
    assert store.pending(10) == []
    assert store.claim_tick(due, "a", past)
    assert not store.claim_tick(due, "b", past)  # running: a second claim never overlaps it
    assert store.due(10) == []
    row = store.get(due)
    assert row is not None and row.status == "running" and row.tick_at == past


def test_finish_and_release_keep_the_schedule(store: SqlTaskStore) -> None:
    tick = datetime(2026, 3, 1, 12, 0, 0)
    task = store.submit("t", "{}", schedule=(EVERY_2S, tick))
    assert store.claim_tick(task, "a", tick)
    run = store.start_run(task, "a")
    assert store.finish(task, run, status="failed", run_status="failed", exit_code=1, result=None, error="boom",
                        claimed_by="a", schedule=(EVERY_2S, tick + timedelta(seconds=2)))
    row = store.get(task)
    assert row is not None and row.status == "scheduled" and row.next_run_at == tick + timedelta(seconds=2)
    assert store.runs(task)[-1].status == "failed"  # the failure stays on its run; the schedule goes on
    # A child that died without recording: the task waits again for that run's tick (due at once).
    later = tick + timedelta(seconds=2)
    assert store.claim_tick(task, "b", later)
    store.start_run(task, "b")
    assert store.release(task, "b", exit_code=-9, error="killed", run_status="crashed") == "scheduled"
    row = store.get(task)
    assert row is not None and row.status == "scheduled" and row.next_run_at == later == row.tick_at
    assert due_tick(EVERY_2S, row.next_run_at, later + timedelta(minutes=1), row.tick_at) == later


def test_pause_and_resume(store: SqlTaskStore) -> None:
    past = past_tick()
    task = store.submit("t", "{}", schedule=(EVERY_2S, past))
    once = store.submit("once", "{}")
    assert store.set_paused(task, True)
    assert not store.set_paused(once, True)  # no schedule: nothing to pause
    assert store.due(10) == [] and not store.claim_tick(task, "a", past)
    resume_at = past + timedelta(hours=1)
    assert store.set_paused(task, False, resume_at)
    row = store.get(task)
    assert row is not None and not row.paused and row.next_run_at == resume_at
