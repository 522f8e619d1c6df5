"""Options parsing: JSON-like mappings into frozen dataclasses, every problem at once, with key paths.

``parse_options`` reads the dataclass's own field types, so the options of the engine, the task and
every plugin follow one rule: unknown keys are rejected, types are checked (an ``int`` is never a
``bool``), and each problem carries its key path (``destinations[1].params.table``). Problems are
collected, never raised one by one. Plugins import this module, never the task model.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import re
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import field
from typing import Any, Literal, Protocol, runtime_checkable

from wormhole.redaction import MASK, is_secret_key

MAX_MESSAGE = 400
"""Longest problem text kept (values inside it are already cut by :func:`show_value`)."""


class Problems:
    """Collects validation problems, each prefixed with its key path."""

    def __init__(self) -> None:
        self.items: list[str] = []

    def add(self, path: str, message: str) -> None:
        if len(message) > MAX_MESSAGE:  # a check that echoed a pasted blob must not flood the log
            message = f"{message[:MAX_MESSAGE]}... (cut)"
        self.items.append(f"{path or '<root>'}: {message}")

    def __bool__(self) -> bool:
        return bool(self.items)


@runtime_checkable
class CheckedOptions(Protocol):
    """Options with rules across their fields: ``check`` records what breaks them in ``problems``."""

    def check(self, path: str, problems: Problems) -> None: ...


@runtime_checkable
class ResolvedOptions(Protocol):
    """Options whose keys describe one of several shapes (a tagged union): ``resolve`` returns that shape."""

    def resolve(self) -> Any: ...


def join_path(path: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else key


_MISSING = object()

SHOWN_CHARS = 60
"""Longest value text a message echoes; longer values are cut, so a pasted blob never floods a log."""

MAX_NUMBER = 31_536_000.0
"""Largest float option unless the option sets its own ``max``: a year in seconds, which every
timeout the drivers take (pymysql's included) and every sleep accepts."""

INT64 = (-(2**63), 2**63 - 1)
"""Integer options fit a signed 64-bit integer unless they set their own bounds (SQL and Spark do)."""

def show_value(value: Any, path: str = "") -> str:
    """``value`` for a message: never a value under a secret key (anywhere on its path: the whole
    value of a secret key is hidden, nested ones included), long values cut."""
    if any(is_secret_key(key) for key in re.split(r"[.\[\]]+", path) if key):
        return MASK
    text = repr(value)
    if len(text) > SHOWN_CHARS:
        text = f"{text[:SHOWN_CHARS]}... ({len(text)} characters)"
    return text


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    return {bool: "boolean", int: "integer", float: "number", str: "string", list: "array",
            dict: "object"}.get(type(value), type(value).__name__)


def _convert(value: Any, hint: Any, path: str, problems: Problems, meta: Mapping[str, Any]) -> Any:
    """Check ``value`` against ``hint``; return the converted value or ``_MISSING`` on a problem."""
    if hint is Any:
        return value
    origin = typing.get_origin(hint)
    convert = _BY_ORIGIN.get(origin) if origin is not None else _BY_TYPE.get(hint)
    if convert is not None:
        return convert(value, hint, path, problems, meta)
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):  # a class, never an instance
        result = parse_options(hint, value, path, problems)
        return _MISSING if result is None else result
    raise TypeError(f"unsupported option type {hint!r} at {path}")


def _wrong_type(expected: str, value: Any, path: str, problems: Problems) -> Any:
    problems.add(path, f"expected {expected}, got {_type_name(value)} {show_value(value, path)}")
    return _MISSING


def _union(value: Any, hint: Any, path: str, problems: Problems, meta: Mapping[str, Any]) -> Any:
    args = typing.get_args(hint)
    if value is None and type(None) in args:
        return None
    rest = [a for a in args if a is not type(None)]
    if len(rest) == 1:
        return _convert(value, rest[0], path, problems, meta)
    return value


def _literal(value: Any, hint: Any, path: str, problems: Problems, meta: Mapping[str, Any]) -> Any:
    args = typing.get_args(hint)
    if value not in args:
        problems.add(path, f"expected one of {', '.join(repr(a) for a in args)}, got {show_value(value, path)}")
        return _MISSING
    return value


def _tuple(value: Any, hint: Any, path: str, problems: Problems, meta: Mapping[str, Any]) -> Any:
    if not isinstance(value, list):
        problems.add(path, f"expected an array, got {_type_name(value)}")
        return _MISSING
    args = typing.get_args(hint)
    item_hint = args[0] if args else Any
    out = [_convert(v, item_hint, join_path(path, i), problems, {}) for i, v in enumerate(value)]
    if any(v is _MISSING for v in out):
        return _MISSING
    if "min_items" in meta and len(out) < meta["min_items"]:
        problems.add(path, f"needs at least {meta['min_items']} item(s)")
        return _MISSING
    return tuple(out)


def _mapping(value: Any, hint: Any, path: str, problems: Problems, meta: Mapping[str, Any]) -> Any:
    if not isinstance(value, dict):
        problems.add(path, f"expected an object, got {_type_name(value)}")
        return _MISSING
    return value


def _bool(value: Any, hint: Any, path: str, problems: Problems, meta: Mapping[str, Any]) -> Any:
    return value if isinstance(value, bool) else _wrong_type("a boolean", value, path, problems)


def _int(value: Any, hint: Any, path: str, problems: Problems, meta: Mapping[str, Any]) -> Any:
    if not isinstance(value, int) or isinstance(value, bool):
        return _wrong_type("an integer", value, path, problems)
    low, high = INT64
    if not ("min" in meta or low <= value) or not ("max" in meta or value <= high):
        problems.add(path, f"{show_value(value, path)} is out of range (a 64-bit integer)")
        return _MISSING
    return _in_bounds(value, path, problems, meta)


def _float(value: Any, hint: Any, path: str, problems: Problems, meta: Mapping[str, Any]) -> Any:
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return _wrong_type("a number", value, path, problems)
    try:
        value = float(value)
    except OverflowError:  # an integer too large for a float
        value = math.inf
    if not math.isfinite(value) or ("max" not in meta and value > MAX_NUMBER):
        problems.add(path, f"{show_value(value, path)} is too large (at most {MAX_NUMBER:,.0f})")
        return _MISSING
    return _in_bounds(value, path, problems, meta)


def _in_bounds(value: float, path: str, problems: Problems, meta: Mapping[str, Any]) -> Any:
    """``value`` within the option's own ``min`` and ``max``, if it sets them."""
    if "min" in meta and value < meta["min"]:
        problems.add(path, f"must be >= {meta['min']}, got {show_value(value, path)}")
        return _MISSING
    if "max" in meta and value > meta["max"]:
        problems.add(path, f"must be <= {meta['max']}, got {show_value(value, path)}")
        return _MISSING
    return value


def _str(value: Any, hint: Any, path: str, problems: Problems, meta: Mapping[str, Any]) -> Any:
    if not isinstance(value, str):
        return _wrong_type("a string", value, path, problems)
    if "\x00" in value:
        # No path, host, name or SQL text takes a NUL: the OS and the drivers refuse it (ValueError).
        problems.add(path, "must not contain a NUL character (\\u0000)")
        return _MISSING
    if meta.get("nonempty") and not value.strip():
        # " " as a host or a path only fails later, deep in a driver: refuse it here.
        problems.add(path, "must not be empty or blank")
        return _MISSING
    pattern = meta.get("pattern")
    if pattern and not re.fullmatch(pattern, value):
        problems.add(path, f"{show_value(value, path)} does not match {pattern}")
        return _MISSING
    return value


_Converter = Callable[[Any, Any, str, Problems, Mapping[str, Any]], Any]

_BY_ORIGIN: dict[Any, _Converter] = {typing.Union: _union, types.UnionType: _union, Literal: _literal,
                                     tuple: _tuple, dict: _mapping, Mapping: _mapping}
"""Converters of generic hints (``X | None``, ``Literal[...]``, ``tuple[X, ...]``, ``dict[...]``), by origin."""
_BY_TYPE: dict[Any, _Converter] = {bool: _bool, int: _int, float: _float, str: _str, dict: _mapping,
                                   Mapping: _mapping}
"""Converters of plain hints, by the hint itself (a bare ``dict`` or ``Mapping`` included)."""


def parse_options(cls: type, raw: Any, path: str, problems: Problems) -> Any:
    """Build dataclass ``cls`` from ``raw``; record problems and return None when it cannot.

    A dataclass may be :class:`CheckedOptions` (rules across fields) and :class:`ResolvedOptions`:
    ``resolve`` is called once the check found nothing, to return what the params describe (one shape
    of a tagged union) in place of the flat dataclass.
    """
    if not isinstance(raw, dict):
        problems.add(path, f"expected an object, got {_type_name(raw)}")
        return None
    hints, fields = _shape(cls)
    ok = True
    for key in raw:
        if key not in fields:
            problems.add(join_path(path, key), f"unknown key (expected one of: {', '.join(fields)})")
            ok = False
    values: dict[str, Any] = {}
    for name, f in fields.items():
        key_path = join_path(path, name)
        if name in raw:
            converted = _convert(raw[name], hints[name], key_path, problems, f.metadata)
            if converted is _MISSING:
                ok = False
            else:
                values[name] = converted
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            problems.add(key_path, "required key is missing")
            ok = False
    if not ok:
        return None
    instance = cls(**values)
    if isinstance(instance, CheckedOptions):
        before = len(problems.items)
        instance.check(path, problems)
        if len(problems.items) > before:
            return instance
    return instance.resolve() if isinstance(instance, ResolvedOptions) else instance


@functools.cache
def _shape(cls: type) -> tuple[dict[str, Any], dict[str, dataclasses.Field[Any]]]:
    """The field types and init fields of an options dataclass (resolving the hints is costly)."""
    return typing.get_type_hints(cls), {f.name: f for f in dataclasses.fields(cls) if f.init}


def opt(default: Any = dataclasses.MISSING, **meta: Any) -> Any:
    """A dataclass field with validation metadata (``min``, ``max``, ``pattern``, ``nonempty``)."""
    if default is dataclasses.MISSING:
        return field(metadata=meta)
    if isinstance(default, (list, dict, set)):
        raise TypeError("use tuples or None for option defaults")
    return field(default=default, metadata=meta)
