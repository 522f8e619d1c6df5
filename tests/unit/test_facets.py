"""Each store's roles have the facets its classes can serve, and each facet calls its own store's classes.

A facet holds the store's functions, so it cannot promise what the classes lack (mypy holds its functions
to the periphery class the role builds, since every store builds its roles apart from ``Plugin(...)``,
where the field's type would make the check pass anything). What typing cannot see is a facet left out:
a store whose splits are durable but without ``durable`` would never resume. Here the probing the engine
gave up is done once, on the classes, for every built-in store.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest

from wormhole.errors import PluginError
from wormhole.plugins import registry
from wormhole.plugins.base import Plugin

STORES = ("file", "hive", "mysql", "postgres", "sqlite", "stream")
PLUGINS = Path(__file__).resolve().parents[2] / "wormhole" / "plugins"


def _classes(plugin: Plugin) -> tuple[type | None, type | None, type | None]:
    """(source periphery, sink periphery, writer) classes; the hive store builds them in factories."""
    if plugin.name == "hive":
        from wormhole.plugins.file.writer import FileWriter
        from wormhole.plugins.hive.periphery import HiveReaderPeriphery, HiveWriterPeriphery

        return HiveReaderPeriphery, HiveWriterPeriphery, FileWriter

    def cls(factory: Any) -> type | None:
        return factory if isinstance(factory, type) else None

    return (cls(plugin.source.periphery) if plugin.source else None,
            cls(plugin.sink.periphery) if plugin.sink else None,
            cls(plugin.sink.writer) if plugin.sink else None)


def _has(cls: type | None, *methods: str) -> bool:
    return cls is not None and all(callable(getattr(cls, m, None)) for m in methods)


def _method(cls: type | None, name: str) -> Any:
    return getattr(cls, name, None) if cls is not None else None


@pytest.mark.parametrize("name", STORES)
def test_a_store_has_the_facets_its_classes_serve_and_they_call_its_classes(name: str) -> None:
    plugin = registry.get(name)
    source_periphery, sink_periphery, writer = _classes(plugin)
    source, sink = plugin.source, plugin.sink
    assert sink is not None and source is not None  # every built-in store is both
    durable = _has(writer, "write_split", "end_split", "abort_split") and \
        _has(sink_periphery, "durable_splits", "release")
    assert (sink.durable is not None) == durable
    if sink.durable is not None:
        assert (sink.durable.writer, sink.durable.held, sink.durable.release) == \
            (writer, _method(sink_periphery, "durable_splits"), _method(sink_periphery, "release"))
    assert (sink.leftovers is not None) == _has(sink_periphery, "leftovers", "clean_leftovers")
    if sink.leftovers is not None:
        assert (sink.leftovers.find, sink.leftovers.clean) == \
            (_method(sink_periphery, "leftovers"), _method(sink_periphery, "clean_leftovers"))
    assert sink.add_written == _method(sink_periphery, "add_written")
    assert source.busy_threads == _method(source_periphery, "busy_threads")
    # An encoding is a byte format both ends name: a reader that sends it, a periphery whose writers load it.
    reader = source.reader if isinstance(source.reader, type) else None
    assert (source.encoded is not None) == _has(reader, "encoding", "read_encoded")
    if source.encoded is not None:
        assert source.encoded.reader is reader
    assert (sink.encoded is not None) == _has(sink_periphery, "takes_encoding")
    if sink.encoded is not None:
        assert sink.encoded.takes == _method(sink_periphery, "takes_encoding")
        assert source.encoded is not None and source.encoded.format == sink.encoded.format


@pytest.mark.parametrize("name", STORES)
def test_a_plan_shows_each_sink_option_that_chooses_how_rows_are_written_and_only_options(name: str) -> None:
    """A destination's method in the plan (``method_keys``) names fields of the store's sink options only, and
    among them every one it has of the options that choose how rows are written (format, mode, load,
    write_mode, method)."""
    sink = registry.sink(name)
    fields = set(sink.options.__dataclass_fields__)
    assert set(sink.method_keys) <= fields
    assert set(sink.method_keys) >= fields & {"format", "mode", "load", "write_mode", "method"}


@pytest.mark.parametrize("name", STORES)
def test_a_store_builds_its_roles_apart_from_its_plugin_so_mypy_checks_the_facets(name: str) -> None:
    """Inside ``Plugin(sink=SinkRole(...))`` the role's periphery type would be the field's (Any), and a
    facet naming another class's methods would type-check."""
    tree = ast.parse((PLUGINS / name / "__init__.py").read_text(encoding="utf-8"))
    (plugin,) = [n.value for n in tree.body if isinstance(n, ast.Assign)
                 and [t.id for t in n.targets if isinstance(t, ast.Name)] == ["PLUGIN"]]
    assert isinstance(plugin, ast.Call)
    roles = [k.arg for k in plugin.keywords if isinstance(k.value, ast.Call)]
    assert roles == [], f"{name}: build {roles} in statements of their own"


def test_a_role_is_frozen_and_asking_a_store_for_a_role_it_lacks_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(AttributeError):
        registry.sink("mysql").durable = None  # type: ignore[misc]
    monkeypatch.setitem(registry._loaded, "readonly", Plugin(name="readonly", description="a source only",
                                                               source=registry.source("stream")))
    with pytest.raises(PluginError, match="'readonly' cannot be a destination"):
        registry.sink("readonly")
