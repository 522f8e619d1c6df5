"""Task and engine configuration: every problem reported at once, each with its key path."""

from __future__ import annotations

from pathlib import Path

import pytest

from wormhole.config import EngineConf, ErrorLimit
from wormhole.errors import ConfigError, InvalidTaskConfig
from wormhole.task_spec import TaskSpec

REPO = Path(__file__).resolve().parents[2]


def good() -> dict:
    return {"name": "t", "source": {"plugin": "stream", "params": {"rows": 10}},
            "destinations": [{"id": "a", "plugin": "stream"}, {"id": "b", "plugin": "stream", "concurrency": 2}]}


def problems_of(raw: object) -> list[str]:
    with pytest.raises(InvalidTaskConfig) as info:
        TaskSpec.from_mapping(raw)
    return info.value.problems


class TestTaskSpec:
    def test_valid_task_parses_into_frozen_objects(self) -> None:
        """A valid task becomes typed, frozen specs with plugin options parsed."""
        spec = TaskSpec.from_mapping(good())
        assert spec.source.options.rows == 10
        assert [d.id for d in spec.destinations] == ["a", "b"]
        assert spec.destinations[1].concurrency == 2
        with pytest.raises(AttributeError):
            spec.name = "x"  # type: ignore[misc]

    def test_every_problem_is_reported_at_once_with_its_path(self) -> None:
        """Unknown key, wrong type, unknown plugin and duplicate id all appear in one error."""
        raw = good()
        raw["source"]["params"]["rows"] = "ten"
        raw["destinations"][0]["params"] = {"bogus": 1}
        raw["destinations"][1]["id"] = "a"
        raw["destinations"].append({"id": "c", "plugin": "nope"})
        raw["extra"] = True
        found = "\n".join(problems_of(raw))
        assert "source.params.rows: expected an integer, got string 'ten'" in found
        assert "destinations[0].params.bogus: unknown key" in found
        assert "destinations[1].id: duplicate id 'a'" in found
        assert "destinations[2].plugin: unknown plugin 'nope'" in found
        assert "extra: unknown key" in found

    def test_missing_source_and_empty_destinations(self) -> None:
        """A task without source or destinations names both keys."""
        found = "\n".join(problems_of({"destinations": []}))
        assert "source: required key is missing" in found
        assert "destinations: needs at least 1 item(s)" in found

    def test_booleans_are_not_integers(self) -> None:
        """``true`` is not accepted where an integer is expected."""
        raw = good()
        raw["destinations"][0]["concurrency"] = True
        assert any("destinations[0].concurrency: expected an integer" in p for p in problems_of(raw))

    def test_malformed_json(self) -> None:
        """Malformed JSON is reported as such, with the parser's position."""
        with pytest.raises(InvalidTaskConfig, match="malformed JSON"):
            TaskSpec.from_json('{"source": ')

    def test_plugin_params_checked_even_when_the_outer_shape_is_wrong(self) -> None:
        """A missing destination id does not hide the problems in that destination's params."""
        raw = good()
        del raw["destinations"][0]["id"]
        raw["destinations"][0]["params"] = {"fail_after": -1}
        found = "\n".join(problems_of(raw))
        assert "destinations[0].id: required key is missing" in found
        assert "destinations[0].params.fail_after: must be >= 0" in found

    def test_source_only_plugin_rules_and_limits(self) -> None:
        """Error limits are validated (percentage within 0..1) and engine choices are enumerated."""
        raw = good()
        raw["settings"] = {"error_limit": {"percentage": 1.5}, "consistency": "sometimes"}
        found = "\n".join(problems_of(raw))
        assert "settings.error_limit.percentage: must be <= 1.0" in found
        assert "settings.consistency: expected one of 'isolated', 'all_or_nothing'" in found

    def test_destination_limit_overrides_task_limit_as_a_whole(self) -> None:
        """A destination's error_limit replaces the task's (unset keys mean no limit), DataX's rule."""
        raw = good()
        raw["settings"] = {"error_limit": {"record": 5}}
        raw["destinations"][1]["error_limit"] = {"percentage": 0.5}
        spec = TaskSpec.from_mapping(raw)
        engine = EngineConf()
        assert spec.error_limit_for(spec.destinations[0], engine) == ErrorLimit(record=5)
        assert spec.error_limit_for(spec.destinations[1], engine) == ErrorLimit(percentage=0.5)


class TestEngineConf:
    def test_shipped_engine_toml_equals_the_built_in_defaults(self) -> None:
        """conf/engine.toml documents the defaults; the code's defaults must not drift from it."""
        assert EngineConf.load(REPO / "conf") == EngineConf()

    def test_bad_engine_conf_names_the_key(self, tmp_path: Path) -> None:
        """A wrong key or type in engine.toml is a ConfigError naming it."""
        (tmp_path / "engine.toml").write_text("[exchange]\nbatch_rows = 'many'\n[nope]\n")
        with pytest.raises(ConfigError) as info:
            EngineConf.load(tmp_path)
        assert "exchange.batch_rows: expected an integer" in str(info.value)
        assert "nope: unknown key" in str(info.value)

    def test_missing_conf_dir_is_an_error(self, tmp_path: Path) -> None:
        """An explicit --conf directory without engine.toml is an error, not silently the defaults."""
        with pytest.raises(ConfigError, match="does not exist"):
            EngineConf.load(tmp_path / "nowhere")


def test_destination_concurrency_defaults_to_the_store_s_own() -> None:
    from wormhole.task_spec import TaskSpec

    mysql = {"plugin": "mysql", "params": {"user": "u", "database": "d", "table": "t"}}
    spec = TaskSpec.from_mapping({
        "source": {"plugin": "stream", "params": {"rows": 1}},
        "destinations": [{"id": "a", **mysql}, {"id": "b", **mysql, "concurrency": 1},
                         {"id": "c", "plugin": "file", "params": {"path": "out", "format": "csv"}}]})
    assert [d.concurrency for d in spec.destinations] == [3, 1, 1]
