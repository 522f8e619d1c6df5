"""Each store's declared capabilities (its ``capabilities.py``) are true of its classes.

The engine reads the declaration and never probes a store, so a declaration that promised what the
classes lack would fail a run, and one that left out what they have would lose it (a store whose
splits are durable but not declared so would never resume). Here the probing the engine gave up is
done once, on the classes, for every built-in store.
"""

from __future__ import annotations

from typing import Any

import pytest

from wormhole.plugins import registry
from wormhole.plugins.base import Plugin
from wormhole.plugins.capabilities import Capabilities

STORES = ("file", "hive", "mysql", "postgres", "sqlite", "stream")


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


@pytest.mark.parametrize("name", STORES)
def test_a_store_declares_what_its_classes_do(name: str) -> None:
    plugin = registry.get(name)
    caps = plugin.capabilities
    source_periphery, sink_periphery, writer = _classes(plugin)
    durable = (_has(writer, "write_split", "end_split", "abort_split")
               and _has(sink_periphery, "durable_splits", "release"))
    found = {
        "durable_splits": durable,
        "leftovers": _has(sink_periphery, "leftovers", "clean_leftovers"),
        "counts_written": _has(sink_periphery, "add_written"),
        "busy_threads": _has(source_periphery, "busy_threads"),
    }
    assert {k: getattr(caps, k) for k in found} == found
    reader = plugin.source.reader if plugin.source and isinstance(plugin.source.reader, type) else None
    # An encoding is a byte format both ends name: a reader that sends it, a periphery whose writers load it.
    assert (caps.encoded_read is not None) == _has(reader, "encoding", "read_encoded")
    assert (caps.encoded_write is not None) == _has(sink_periphery, "takes_encoding")


@pytest.mark.parametrize("name", STORES)
def test_a_store_declares_its_capabilities_in_one_frozen_object(name: str) -> None:
    caps = registry.capabilities(name)
    assert isinstance(caps, Capabilities)
    assert caps is registry.get(name).capabilities
    with pytest.raises(AttributeError):
        caps.durable_splits = not caps.durable_splits  # type: ignore[misc]
    if caps.pushdown is not None or caps.spark_only or caps.busy_threads:
        assert registry.get(name).source is not None, "a source capability of a store that is no source"
    if caps.durable_splits or caps.leftovers or caps.counts_written or caps.spark_partitions or caps.needs_spark:
        assert registry.get(name).sink is not None, "a destination capability of a store that is no destination"
