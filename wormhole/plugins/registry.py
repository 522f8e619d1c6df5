"""Plugin registry: built-in stores mapped by name in code and imported lazily, plus entry points.

Built-ins are imported on first use, so a task that never names a Spark store never imports
pyspark. Third-party stores register through the ``wormhole.plugins`` entry-point group; a name
that is taken twice is an error, never a silent override.
"""

from __future__ import annotations

import importlib
from importlib.metadata import entry_points
from typing import Any

from wormhole.errors import PluginError, UnknownPlugin
from wormhole.plugins.base import Plugin, SinkRole, SourceRole

BUILTIN: dict[str, str] = {
    "stream": "wormhole.plugins.stream:PLUGIN",
    "file": "wormhole.plugins.file:PLUGIN",
    "sqlite": "wormhole.plugins.sqlite:PLUGIN",
    "mysql": "wormhole.plugins.mysql:PLUGIN",
    "postgres": "wormhole.plugins.postgres:PLUGIN",
    "hive": "wormhole.plugins.hive:PLUGIN",
}

_loaded: dict[str, Plugin] = {}


def _external() -> dict[str, str]:
    found: dict[str, str] = {}
    for ep in entry_points(group="wormhole.plugins"):
        if ep.name in BUILTIN or ep.name in found:
            raise PluginError(f"plugin name {ep.name!r} is registered twice (entry point {ep.value})")
        found[ep.name] = ep.value
    return found


def targets() -> dict[str, str]:
    """Every known plugin name and the ``module:attribute`` it loads from."""
    return {**BUILTIN, **_external()}


def names() -> list[str]:
    return sorted(targets())


def get(name: str) -> Plugin:
    """The plugin registered under ``name``; ``UnknownPlugin`` lists the known names."""
    if name in _loaded:
        return _loaded[name]
    target = targets().get(name)
    if target is None:
        raise UnknownPlugin(f"unknown plugin {name!r} (known: {', '.join(names())})", plugin=name)
    module_name, _, attr = target.partition(":")
    plugin = getattr(importlib.import_module(module_name), attr)
    if not isinstance(plugin, Plugin) or plugin.name != name:
        raise PluginError(f"{target} is not a wormhole Plugin named {name!r}")
    _loaded[name] = plugin
    return plugin


def source(name: str) -> SourceRole[Any]:
    """The source role of the store registered under ``name`` (a task's source: validated to have one)."""
    role = get(name).source
    if role is None:
        raise PluginError(f"plugin {name!r} cannot be a source", plugin=name)
    return role


def sink(name: str) -> SinkRole[Any]:
    """The sink role of the store registered under ``name`` (a task's destination: validated to have one)."""
    role = get(name).sink
    if role is None:
        raise PluginError(f"plugin {name!r} cannot be a destination", plugin=name)
    return role
