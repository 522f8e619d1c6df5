"""The manual's store parameter reference (docs/manual/store-parameters.md) is generated from the options
dataclasses and complete."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from wormhole.plugins import describe, registry

REPO = Path(__file__).resolve().parents[2]


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("manual_params", REPO / "scripts" / "manual_params.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["manual_params"] = module
    spec.loader.exec_module(module)
    return module


def test_manual_parameter_reference_matches_the_options() -> None:
    script = _script()
    reference = script.REFERENCE.read_text(encoding="utf-8")
    assert script.current(reference) == script.generated(), (
        f"{script.REFERENCE.relative_to(REPO)}'s store parameters differ from the options dataclasses: run "
        ".venv/bin/python scripts/manual_params.py")


@pytest.mark.parametrize("name", registry.names())
def test_every_parameter_has_a_description(name: str) -> None:
    """A parameter without the docstring under its field would appear undocumented in the manual."""
    plugin = registry.get(name)
    missing = [f"{role}: {p.name}" for role, options in describe.roles(plugin)
               for p in describe.describe_options(options) if not p.description]
    assert missing == []


def test_types_and_defaults_read_as_json() -> None:
    by_name = {p.name: p for p in describe.describe_options(registry.get("mysql").sink.options)}
    assert (by_name["load"].type, by_name["load"].default) == ('"append" | "truncate" | "staging"', '"append"')
    assert (by_name["table"].type, by_name["table"].default) == ("string", "required")
    assert by_name["batch_size"].type == "integer"
    assert by_name["columns"].type == "array of string"
    src = {p.name: p for p in describe.describe_options(registry.get("mysql").source.options)}
    assert src["connections[].host"].default == "required"
