"""Planning (seed 000, DataX's job planning): the seed's own examples give the seed's results."""

from __future__ import annotations

import threading
from collections import Counter

import pytest
import structlog

from wormhole.config import EngineConf, SpeedConf
from wormhole.errors import InvalidTaskConfig
from wormhole.planning.assign import (
    TaskGroup,
    assign_fairly,
    channels_per_group,
    dispatch_order,
    do_assign,
    resource_buckets,
    task_group_count,
)
from wormhole.planning.channels import SpeedLimits, adjust_channel_number, cap_at_splits, speed_limits
from wormhole.planning.plan import make_plan
from wormhole.plugins.base import Column, Schema, Split
from wormhole.recovery.coordinator import RetryPolicy, SplitCoordinator
from wormhole.source_facts import SourceFacts, SparkFacts, spark_facts
from wormhole.task_spec import SpeedSpec, TaskSpec


def limits(**kw: int | None) -> SpeedLimits:
    base: dict[str, int | None] = {"byte": None, "record": None, "channel_byte": None, "channel_record": None,
                                   "channel": None}
    base.update(kw)
    return SpeedLimits(default_channels=4, **base)  # type: ignore[arg-type]


# -- channel count (JobContainer.adjustChannelNumber) -----------------------------------------------

def test_the_seeds_channel_example_takes_the_smaller_count_and_ignores_speed_channel() -> None:
    # core.transport.channel.speed {record: 100, byte: 100}; job.setting.speed {record: 500,
    # byte: 1000, channel: 1}: 1000/100 = 10 by bytes, 500/100 = 5 by records; 5 wins, channel 1 unused.
    count = adjust_channel_number(limits(byte=1000, record=500, channel_byte=100, channel_record=100, channel=1))
    assert (count.channels, count.rule) == (5, "record")
    assert "500 / channel_record 100 = 5" in count.reason and "byte gives 10" in count.reason


def test_each_limit_alone_divides_and_rounds_down_to_at_least_one() -> None:
    assert adjust_channel_number(limits(byte=1_000_000, channel_byte=300_000)).channels == 3
    assert adjust_channel_number(limits(record=999, channel_record=1000)).channels == 1
    assert adjust_channel_number(limits(record=10_000, channel_record=1000, byte=10, channel_byte=1)).rule == "record"
    assert adjust_channel_number(limits(record=10_000, channel_record=1000, byte=5, channel_byte=1)).rule == "byte"


def test_without_limits_speed_channel_then_the_engine_default() -> None:
    assert (adjust_channel_number(limits(channel=7)).channels, adjust_channel_number(limits(channel=7)).rule) \
        == (7, "channel")
    count = adjust_channel_number(limits())
    assert (count.channels, count.rule) == (4, "default")


def test_a_count_from_limits_is_capped_at_1024_channels() -> None:
    count = adjust_channel_number(limits(record=10**12, channel_record=1))
    assert count.channels == 1024 and count.reason.endswith("capped at 1024 (the most a task may have)")


def test_the_count_is_capped_at_the_number_of_splits() -> None:
    count = cap_at_splits(adjust_channel_number(limits(channel=16)), 3)
    assert count.channels == 3 and "capped at 3 split(s)" in count.reason
    assert cap_at_splits(adjust_channel_number(limits(channel=2)), 3).channels == 2
    assert cap_at_splits(adjust_channel_number(limits(channel=2)), 0).channels == 1


@pytest.mark.parametrize("kind", ["byte", "record"])
def test_a_job_limit_without_its_per_channel_limit_is_an_error_naming_both_keys(kind: str) -> None:
    with pytest.raises(InvalidTaskConfig) as err:
        speed_limits(SpeedSpec(**{kind: 1000}), EngineConf())  # type: ignore[arg-type]
    text = str(err.value)
    assert f"settings.speed.{kind}" in text and f"channel_{kind}" in text and "engine.toml" in text
    assert err.value.exit_code == 204


def test_per_channel_limits_come_from_engine_toml_unless_the_task_sets_them() -> None:
    conf = EngineConf(speed=SpeedConf(channel_record=100, channel_byte=1000))
    assert speed_limits(SpeedSpec(record=500), conf).channel_record == 100
    assert speed_limits(SpeedSpec(record=500, channel_record=250), conf).channel_record == 250
    assert adjust_channel_number(speed_limits(SpeedSpec(record=500, channel_record=250), conf)).channels == 2


# -- task groups (JobAssignUtil) ---------------------------------------------------------------------

def test_the_seeds_assignment_example() -> None:
    # 7 tasks, 20 channels, 5 per group: 4 groups. Reader marks have 3 values, writer marks 2:
    # the reader's win. Seed: tg1 [1, 4], tg2 [3, 7], tg3 [6, 5], tg4 [2].
    reader = ["database_a", "database_a", "database_b", "database_b", "database_b", "database_c", "database_c"]
    writer = ["database_dst_d"] * 2 + ["database_dst_e"] * 5
    ids = [f"task_id_{i}" for i in range(1, 8)]
    assert task_group_count(20, 5) == 4
    groups = assign_fairly(ids, reader, writer, 20, 5)
    assert [list(g.splits) for g in groups] == [["task_id_1", "task_id_4"], ["task_id_3", "task_id_7"],
                                               ["task_id_6", "task_id_5"], ["task_id_2"]]
    assert [g.channels for g in groups] == [5, 5, 5, 5]


def test_the_datax_in_code_example() -> None:
    # JobAssignUtil's comment: a{0,1,2}, b{3,4}, c{5,6,7}, 4 groups: tg0 0,4; tg1 3,6; tg2 5,2; tg3 1,7.
    buckets = {"a": [0, 1, 2], "b": [3, 4], "c": [5, 6, 7]}
    assert do_assign(buckets, 4) == [[0, 4], [3, 6], [5, 2], [1, 7]]


def test_the_writers_marks_decide_when_they_have_more_distinct_values() -> None:
    assert list(resource_buckets(["r"] * 3, ["w1", "w2", "w1"]).items()) == [("w1", [0, 2]), ("w2", [1])]
    assert list(resource_buckets(["r1", "r2"], ["w1", "w2"]).items()) == [("r1", [0]), ("r2", [1])]  # a tie: reader


def test_the_seeds_channel_spread_over_groups() -> None:
    # 13 channels over 5 groups: 13 / 5 = 2 each, the first 13 mod 5 = 3 groups one more.
    assert channels_per_group(13, 5) == [3, 3, 3, 2, 2]
    assert channels_per_group(20, 4) == [5, 5, 5, 5]
    assert sum(g.channels for g in assign_fairly(list("abcdefghijklm"), list("abcdefghijklm"), ["w"] * 13, 13, 3)) \
        == 13


def test_dispatch_order_interleaves_groups() -> None:
    groups = assign_fairly(["a0", "a1", "b0", "b1", "c0"], ["a", "a", "b", "b", "c"], ["w"] * 5, 10, 5)
    assert [list(g.splits) for g in groups] == [["a0", "c0", "b1"], ["b0", "a1"]]
    assert dispatch_order(groups) == ["a0", "b0", "c0", "a1", "b1"]


# -- the split coordinator's requests: own splits first, then work stealing ----------------------

def _coordinator(splits: list[Split], groups: list[TaskGroup]) -> SplitCoordinator:
    return SplitCoordinator(splits, groups, durable=[], fire_and_forget=["d"], held={}, retry=RetryPolicy(0, 0),
                            stop=threading.Event(), log=structlog.get_logger("test"))


def test_a_group_takes_its_own_splits_in_order_then_steals_from_the_busiest() -> None:
    splits = [Split(f"s{i}", "m") for i in range(6)]
    groups = assign_fairly([s.id for s in splits], ["a", "a", "a", "a", "b", "c"], ["w"] * 6, 3, 1)
    assert [list(g.splits) for g in groups] == [["s0", "s1"], ["s4", "s2"], ["s5", "s3"]]
    board = _coordinator(splits, groups)

    def take(group: int) -> tuple[str, int] | None:
        got = board.request(group)
        if got is None:
            return None
        board.read_done(got, 0)
        return got.split.id, got.planned_group

    took = [take(2), take(2), take(2), take(0), take(0), take(1), take(1)]
    # Group 2's own splits in order; then the last split of the group with the most left (group 0 on
    # a tie, the first); group 0 then steals group 1's last; group 1 still gets its first, then none.
    assert took == [("s5", 2), ("s3", 2), ("s1", 0), ("s0", 0), ("s2", 1), ("s4", 1), None]
    assert board.remaining == 0


def test_every_split_is_taken_exactly_once_by_concurrent_channels() -> None:
    splits = [Split(f"s{i}", f"m{i % 5}") for i in range(500)]
    groups = assign_fairly([s.id for s in splits], [s.resource_mark for s in splits], ["w"] * 500, 12, 5)
    board = _coordinator(splits, groups)
    taken: list[str] = []
    lock = threading.Lock()

    def channel(group: int) -> None:
        while (got := board.request(group)) is not None:
            with lock:
                taken.append(got.split.id)
            board.read_done(got, 1)

    threads = [threading.Thread(target=channel, args=(g.id,)) for g in groups for _ in range(g.channels)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert Counter(taken) == Counter(s.id for s in splits) and board.remaining == 0 and board.stats.rows_reread == 0


def test_a_split_waiting_to_be_read_again_is_dropped_when_its_only_destination_fails() -> None:
    """``db`` lost split s0 and fails while s0 waits for its re-read: nobody needs s0 any more, so no
    reader gets it (it used to be handed out with no destination, which ended that reader thread)."""
    splits = [Split("s0", "m"), Split("s1", "m")]
    groups = [TaskGroup(id=0, splits=("s0", "s1"), channels=1)]
    board = SplitCoordinator(splits, groups, durable=["db", "js"], fire_and_forget=[], held={},
                             retry=RetryPolicy(3, 0), stop=threading.Event(), log=structlog.get_logger("test"))
    first = board.request(0)
    assert first is not None and first.split.id == "s0" and first.destinations == {"db", "js"}
    board.read_done(first, 10)
    board.sealed("s0", "js", 10)
    board.lost("s0", "db", "connection lost")  # queued again, for db only
    board.destination_failed("db")
    second = board.request(0)
    assert second is not None and second.split.id == "s1" and second.destinations == {"js"}
    board.read_done(second, 10)
    board.sealed("s1", "js", 10)
    assert board.request(0) is None and board.remaining == 0


# -- the plan decides from the facts alone (issue 36 item 3) -------------------------------------------


def _mysql_to_parquet(engine: str) -> TaskSpec:
    # Port 1: nothing listens there, so a plan that asked the source would fail.
    return TaskSpec.from_mapping({
        "source": {"plugin": "mysql", "params": {"host": "127.0.0.1", "port": 1, "user": "u", "database": "d",
                                                 "table": "t", "connect_retries": 1}},
        "destinations": [{"id": "pq", "plugin": "file", "params": {"path": "/nonexistent/pq", "format": "parquet"}}],
        "settings": {"engine": engine}})


def _facts(spark: SparkFacts) -> SourceFacts:
    schema = Schema((Column("id", "int"), Column("ts", "datetime")))
    return SourceFacts(periphery=None, info=None, schema=schema,  # type: ignore[arg-type]  # unused by the plan
                       splits=(Split("t#0", "127.0.0.1:1", {}),), advice=1, spark=spark)


@pytest.mark.parametrize(("exact", "method"), [
    (frozenset(), "spark native write"),
    (frozenset({"ts"}), "spark partitions, a row writer each"),
    (None, "spark native write (row writers when the source carries exact text)"),
], ids=["none", "ts", "unsaid"])
def test_a_spark_plan_takes_the_sources_exact_text_from_the_facts(exact: frozenset[str] | None, method: str) -> None:
    origin = {"master": "local[2]", "master_from": "settings.spark.master", "conf_file": "built-in defaults"}
    plan = make_plan(_mysql_to_parquet("spark"), _facts(SparkFacts(True, origin, exact)), EngineConf())
    assert plan.engine == "spark" and plan.destinations[0].method.startswith(f"{method}; ")
    assert plan.to_dict()["spark"] == origin


def test_the_facts_ask_nothing_of_spark_for_a_local_plan() -> None:
    spec = _mysql_to_parquet("local")
    facts = spark_facts(spec, EngineConf(), None, _facts(SparkFacts(True)).schema)  # the source is never asked
    assert (facts.origin, facts.exact_text) == (None, None)
    assert make_plan(spec, _facts(facts), EngineConf()).destinations[0].method.startswith("writer threads")
