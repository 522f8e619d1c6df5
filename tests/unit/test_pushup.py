"""A split's placement is fixed at its first read and kept in every later read of it: one tried again in
the same run after a move, and one a resumed run re-reads (the placement its checkpoint rows record)."""

from __future__ import annotations

from typing import Any

import structlog
from structlog.testing import capture_logs

from wormhole.plugins.base import Column, Schema
from wormhole.task_spec import TaskSpec
from wormhole.transform.conf import PushUpConf
from wormhole.transform.plan import TransformPlan, build_plan, placement_id
from wormhole.transform.pushup import PushUp, restore_placements

SOURCE = Schema((Column("id", "int"), Column("grp", "int"), Column("name", "string")))


def plan(transforms: list[Any], pushup: str = "adaptive") -> TransformPlan:
    columns = [{"name": c.name, "type": c.type} for c in SOURCE.columns]  # validation binds to them
    spec = TaskSpec.from_mapping({"source": {"plugin": "stream", "params": {"rows": 10, "columns": columns}},
                                  "transforms": transforms,
                                  "destinations": [{"id": "js", "plugin": "file",
                                                    "params": {"path": "/tmp/x", "format": "jsonl"}}],
                                  "settings": {"pushup": pushup}})
    return build_plan(spec, SOURCE, "sqlite")


FILTERS = [{"filter": "grp = 3"}, {"filter": "id > 10"}, {"derive": {"n2": "id * 2"}}]


def test_a_split_read_again_in_the_same_run_keeps_its_first_placement() -> None:
    p = plan(FILTERS)
    pushup = PushUp(p, PushUpConf(), structlog.get_logger(), channels=2)
    assert pushup.placement_for("s1") == ()
    pushup._move((0, 1), "test", {})
    assert pushup.placement_for("s2") == (0, 1)
    assert pushup.placement_for("s1") == ()  # a failed read tried again: not under the new placement
    assert pushup.splits == {"s1": "none", "s2": placement_id(p, (0, 1))}
    assert pushup.record("s2") == {"plan": placement_id(p, (0, 1)), "pushed": [p.task_ops[0].id, p.task_ops[1].id]}
    assert pushup.reproduced == []


def test_a_resumed_run_reads_each_recorded_split_under_its_recorded_placement() -> None:
    p = plan(FILTERS)
    crashed = PushUp(p, PushUpConf(), structlog.get_logger(), channels=2)
    crashed.placement_for("s1")
    crashed._move((0,), "test", {})
    crashed.placement_for("s2")
    recorded = {s: crashed.record(s) for s in ("s1", "s2")}
    with capture_logs() as events:
        pinned = restore_placements(p, recorded, structlog.get_logger())  # type: ignore[arg-type]
    assert pinned == {"s1": (), "s2": (0,)}
    assert [e["event"] for e in events] == ["pushup.restored"]

    resumed = PushUp(p, PushUpConf(), structlog.get_logger(), channels=2, pinned=pinned)
    assert resumed.placement == ()  # new splits: decided afresh
    assert resumed.placement_for("s2") == (0,)
    assert resumed.placement_for("s3") == ()
    assert resumed.placement_for("s1") == ()
    assert resumed.splits == {"s1": "none", "s2": placement_id(p, (0,)), "s3": "none"}
    assert sorted(resumed.reproduced) == ["s1", "s2"]


def test_a_record_the_plan_cannot_reproduce_is_placed_afresh_and_said() -> None:
    p = plan(FILTERS)
    other = plan([{"filter": "grp = 4"}, *FILTERS[1:]])  # the task's transforms changed since the crash
    recorded = {"s1": {"plan": placement_id(other, (0,)), "pushed": [other.task_ops[0].id]},
                "s2": {"plan": "bogus", "pushed": [p.task_ops[0].id]},
                "s3": {"plan": placement_id(p, (2,)), "pushed": [p.task_ops[2].id]}}  # a derive never runs there
    with capture_logs() as events:
        assert restore_placements(p, recorded, structlog.get_logger()) == {}
    warning = next(e for e in events if e["event"] == "pushup.not_reproduced")
    assert warning["splits"] == 3 and warning["log_level"] == "warning"
