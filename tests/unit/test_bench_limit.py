"""The benchmark's measure against the server's own limit (benchmarks/limit.py): the ratio it prints, the
rounds' channel counts, the parallel loads' exit status, the LOAD DATA text SELECT and the options."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from benchmarks import limit, mysql_profile
from benchmarks.mysql_scenario import Timed
from benchmarks.run import build_parser


def test_wormholes_time_is_printed_as_a_multiple_of_the_limit() -> None:
    assert limit.times_limit(6.8, 4.3) == pytest.approx(1.5814, abs=1e-4)
    assert limit.limit_line("wormhole x1", 6.8, "the one-table LOAD DATA limit", 4.3) == \
        "wormhole x1 = 1.58x the one-table LOAD DATA limit (6.80 s / 4.30 s)"
    assert limit.limit_line("wormhole x3", 10.0, "the 3-parallel LOAD DATA limit", 10.0).startswith(
        "wormhole x3 = 1.00x the 3-parallel")


def test_a_limit_that_took_no_time_is_refused() -> None:
    with pytest.raises(ValueError, match="not a measured limit"):
        limit.times_limit(6.8, 0.0)


def test_the_first_round_tries_every_channel_count_later_rounds_the_fastest() -> None:
    assert limit.round_channels(0, [1, 2], None) == (1, 2)
    assert limit.round_channels(0, [1, 2], 2) == (1, 2)
    assert limit.round_channels(1, [1, 2], 2) == (2,)
    assert limit.round_channels(1, [1, 2], None) == (1, 2)


def test_the_goals_default_settings_run_in_every_round() -> None:
    """The goals are stated for the default channels (0): a best of every round, even when slower."""
    assert limit.round_channels(1, [0, 2], 2, always=0) == (2, 0)
    assert limit.round_channels(1, [0, 2], 0, always=0) == (0,)
    assert limit.round_channels(1, [1, 2], 2, always=0) == (2,)  # not asked for: not run


def test_the_fastest_run_counts() -> None:
    runs = [Timed(seconds=s, peak_rss_mib=1.0, returncode=0, stdout="", stderr="") for s in (5.0, 4.2, 4.8)]
    assert limit.fastest(runs).seconds == 4.2
    with pytest.raises(ValueError):
        limit.fastest([])


@pytest.mark.parametrize(("commands", "code"), [(["true", "true", "true"], 0), (["true", "false", "true"], 1),
                                                (["false"], 1)])
def test_parallel_loads_fail_when_any_one_fails(commands: list[str], code: int) -> None:
    assert subprocess.run(["bash", "-c", limit.parallel(commands)]).returncode == code


def test_parallel_loads_run_at_once(tmp_path: Path) -> None:
    # Each command marks itself started and waits for the other two: run one after another, they never end.
    wait = f"touch {tmp_path}/$BASHPID; until [ $(ls {tmp_path} | wc -l) -ge 3 ]; do sleep 0.01; done"
    done = subprocess.run(["timeout", "20", "bash", "-c", limit.parallel([f"({wait})"] * 3)])
    assert done.returncode == 0


def test_the_load_data_select_escapes_text_columns_and_writes_null_as_backslash_n() -> None:
    sql = limit.load_data_select([("id", "bigint"), ("name", "varchar"), ("payload", "varbinary")], "db", "t")
    assert sql.startswith("SELECT IFNULL(`id`, '\\\\N'), IFNULL(REPLACE(REPLACE(REPLACE(REPLACE(`name`, ")
    assert "'\\\\', '\\\\\\\\'" in sql and "'\\t', '\\\\t'" in sql and "'\\n', '\\\\n'" in sql
    assert sql.count("REPLACE(REPLACE(REPLACE(REPLACE(") == 2  # name and payload, never id
    assert sql.endswith("FROM `db`.`t`")


def test_this_process_cpu_time_is_read_from_proc() -> None:
    sum(i * i for i in range(300_000))  # some CPU time to see
    assert limit.cpu_seconds([os.getpid()]) > 0
    assert limit.cpu_seconds([]) == 0
    assert limit.with_server_cpu((), lambda: Timed(1.0, 1.0, 0, "", "")).server_cpu_s == 0


def test_make_bench_takes_the_limit_options() -> None:
    args = build_parser().parse_args(["--only", "mysql", "--limit-rounds", "3", "--no-mydumper"])
    assert limit.option_fields(args) == {"limit": True, "limit_rounds": 3, "mydumper": False}
    args = build_parser().parse_args(["--only", "postgres", "--no-limit"])
    assert limit.option_fields(args) == {"limit": False, "limit_rounds": 2, "mydumper": True}
    with pytest.raises(SystemExit):
        build_parser().parse_args(["--limit-rounds", "0"])


def _event(name: str, seconds: float, **more: object) -> dict[str, object]:
    return {"event": name, "timestamp": f"2026-11-28T15:00:{seconds:06.3f}Z", **more}


def test_the_profile_reads_the_runs_phases_and_split_latency_from_its_log() -> None:
    events = [_event("reader.started", 1.0), _event("reader.split_done", 2.0, split_id="s0"),
              _event("writer.split_committed", 2.5, split_id="s0", destination="d1"),
              _event("reader.split_done", 3.0, split_id="s1"),
              _event("writer.split_committed", 3.2, split_id="s1", destination="d1"),
              _event("writer.split_committed", 4.0, split_id="s0", destination="d2"),
              _event("writer.split_committed", 4.5, split_id="s1", destination="d2")]
    base = mysql_profile.at(_event("x", 0.0))
    ph = mysql_profile.phases(events, base, base + 5.0)
    assert [round(b - a, 3) for _, a, b in ph.spans()] == [1.0, 2.0, 1.5, 0.5]
    latency = mysql_profile.split_latency(events)
    assert {d: [round(x, 3) for x in v] for d, v in latency.items()} == {"d1": [0.5, 0.2], "d2": [2.0, 1.5]}


def test_the_profile_tells_loads_commits_and_markers_apart() -> None:
    assert [mysql_profile.kind_of(s) for s in ("LOAD DATA LOCAL INFILE 'x' INTO TABLE t", " commit",
                                                "INSERT INTO `_wh_splits` VALUES (1)", "SELECT 1")] == \
        ["load", "commit", "marker", "other"]


def test_the_profiles_source_option_takes_db_dot_table() -> None:
    args = build_parser().parse_args(["--only", "mysql-profile", "--profile-source", "db.t"])
    assert args.profile_source == ("db", "t")
    with pytest.raises(SystemExit):
        build_parser().parse_args(["--profile-source", "no_table"])


def test_the_mysql_part_prints_each_copy_against_its_limit(capsys: pytest.CaptureFixture[str]) -> None:
    from benchmarks.mysql_scenario import Figure, Options, limit_report

    figures = [Figure("wormhole x1", 10, 1, 6.8, 1.0, cpu_s=2.0, server_cpu_s=6.0),
               Figure("wormhole x3", 10, 3, 10.2, 1.0, cpu_s=3.0, server_cpu_s=9.0),
               Figure("LOAD DATA limit x1", 10, 1, 4.3, 1.0, cpu_s=0.1, server_cpu_s=3.9),
               Figure("LOAD DATA limit x3", 10, 3, 7.5, 1.0, cpu_s=0.3, server_cpu_s=8.7),
               Figure("source scan to /dev/null", 10, 0, 1.36, 1.0)]
    limits = limit_report({f.scenario: f for f in figures}, Options())
    out = capsys.readouterr().out
    assert "wormhole x1 = 1.58x the one-table LOAD DATA limit (6.80 s / 4.30 s)" in out
    assert "wormhole x3 = 1.36x the 3-parallel LOAD DATA limit (10.20 s / 7.50 s)" in out
    assert "CPU: wormhole x1 2.0 s + server 6.0 s = 8.0 s; the limit 4.0 s (2.00x)" in out
    assert "the source scan alone (1.36 s) is 20% of wormhole x1's time" in out
    assert [(x["copy"], x["times_limit"]) for x in limits] == [("wormhole x1", 1.581), ("wormhole x3", 1.36)]


def test_the_default_settings_runs_are_held_to_issue_40s_goals(capsys: pytest.CaptureFixture[str]) -> None:
    from benchmarks.mysql_scenario import Figure, Options, limit_report

    figures = [Figure("wormhole x1 (default settings)", 10, 1, 5.5, 1.0),
               Figure("wormhole x3 (default settings)", 10, 3, 9.1, 1.0),
               Figure("LOAD DATA limit x1", 10, 1, 4.3, 1.0), Figure("LOAD DATA limit x3", 10, 3, 7.5, 1.0)]
    limits = limit_report({f.scenario: f for f in figures}, Options())
    out = capsys.readouterr().out
    assert ("wormhole x1 (default settings) = 1.28x the one-table LOAD DATA limit (5.50 s / 4.30 s); "
            "goal at most 1.3x: PASS") in out
    assert "goal at most 1.2x: MISS" in out  # 9.1 / 7.5 = 1.21x
    assert [(x["copy"], x["goal"], x["status"]) for x in limits] == [
        ("wormhole x1 (default settings)", 1.3, "PASS"), ("wormhole x3 (default settings)", 1.2, "MISS")]


def test_channel_zero_is_a_task_with_no_speed_setting() -> None:
    from benchmarks.mysql_scenario import Options, Server, channel_name, wormhole_spec

    assert Options().channels[0] == 0 and channel_name(0) == "default" and channel_name(2) == "ch2"
    assert wormhole_spec(Server(), "t", 1, 0, 3)["settings"] == {}
    assert wormhole_spec(Server(), "t", 1, 2, 3)["settings"] == {"speed": {"channel": 2}}
