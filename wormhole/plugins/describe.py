"""Describe a store's parameters from its options dataclasses: what ``wormhole plugins NAME`` prints.

The options dataclasses are the one source of truth: names and types from their fields, defaults
from the field defaults, descriptions from the docstring written under each field (read from the
class's source with ``ast``, so nothing is repeated in metadata). The manual's parameter tables
(docs/manual/store-parameters.md) are generated from here and a test checks they match, so the docs
cannot drift from the code.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import itertools
import textwrap
import types
import typing
from dataclasses import dataclass
from typing import Any, Literal

from wormhole.plugins.base import Plugin


@dataclass(frozen=True, slots=True)
class ParamDoc:
    name: str
    """Dotted for nested options: ``connections[].host``."""
    type: str
    default: str
    """``required`` when the key must be given."""
    description: str


def _field_docs(cls: type) -> dict[str, str]:
    """The docstring under each field of ``cls`` (``name: T = ...`` followed by a string)."""
    try:
        source = textwrap.dedent(inspect.getsource(cls))
    except (OSError, TypeError):  # no source shipped (a zipped or compiled plugin): no descriptions
        return {}
    body = ast.parse(source).body[0]
    docs: dict[str, str] = {}
    if not isinstance(body, ast.ClassDef):
        return docs
    statements = body.body
    for stmt, following in itertools.pairwise(statements):
        if (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)
                and isinstance(following, ast.Expr) and isinstance(following.value, ast.Constant)
                and isinstance(following.value.value, str)):
            docs[stmt.target.id] = " ".join(following.value.value.split())
    return docs


def _dataclass_in(hint: Any) -> type | None:
    """The options dataclass inside ``hint`` (``X``, ``X | None``, ``tuple[X, ...]``), if any."""
    if dataclasses.is_dataclass(hint) and isinstance(hint, type):
        return hint
    for arg in typing.get_args(hint):
        found = _dataclass_in(arg)
        if found is not None:
            return found
    return None


def _is_array(hint: Any) -> bool:
    if typing.get_origin(hint) is tuple:
        return True
    return any(_is_array(a) for a in typing.get_args(hint) if typing.get_origin(hint) in (typing.Union,
                                                                                        types.UnionType))


def type_name(hint: Any) -> str:
    """A hint as a user of JSON reads it: ``integer``, ``"a" | "b"``, ``array of string``."""
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        rest = [a for a in args if a is not type(None)]
        return " | ".join(type_name(a) for a in rest)
    if origin is Literal:
        return " | ".join(f'"{a}"' if isinstance(a, str) else str(a) for a in args)
    if origin is tuple:
        return f"array of {type_name(args[0]) if args else 'any'}"
    if origin is dict or hint is dict:
        return "object"
    if dataclasses.is_dataclass(hint):
        return "object"
    return {bool: "boolean", int: "integer", float: "number", str: "string"}.get(hint, getattr(hint, "__name__",
                                                                                               str(hint)))


def _default_text(f: dataclasses.Field[Any]) -> str:
    if f.default is not dataclasses.MISSING:
        value = f.default
    elif f.default_factory is not dataclasses.MISSING:
        value = f.default_factory()
    else:
        return "required"
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, (tuple, list)):
        return "[" + ", ".join(f'"{v}"' if isinstance(v, str) else str(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{}"
    return str(value)


def describe_options(cls: type, prefix: str = "") -> list[ParamDoc]:
    """Every parameter of options dataclass ``cls``, nested options flattened as ``outer[].inner``."""
    hints = typing.get_type_hints(cls)
    docs: dict[str, str] = {}
    for base in reversed(cls.__mro__):  # fields inherited from a shared base keep their docs
        if dataclasses.is_dataclass(base):
            docs.update(_field_docs(base))
    out: list[ParamDoc] = []
    for f in dataclasses.fields(cls):
        if not f.init or f.name.startswith("_"):
            continue
        hint = hints[f.name]
        out.append(ParamDoc(name=prefix + f.name, type=type_name(hint), default=_default_text(f),
                            description=docs.get(f.name, "")))
        nested = _dataclass_in(hint)
        if nested is not None:
            out.extend(describe_options(nested, f"{prefix}{f.name}{'[]' if _is_array(hint) else ''}."))
    return out


def roles(plugin: Plugin) -> list[tuple[str, type]]:
    """``(role, options class)`` for each role the plugin has, source first."""
    found: list[tuple[str, type]] = []
    if plugin.source is not None:
        found.append(("source", plugin.source.options))
    if plugin.sink is not None:
        found.append(("destination", plugin.sink.options))
    return found


def render_text(plugin: Plugin) -> str:
    """The plain-text listing ``wormhole plugins NAME`` prints."""
    lines = [f"{plugin.name}: {plugin.description}"]
    for role, options in roles(plugin):
        where = "source.params" if role == "source" else "destinations[].params"
        params = describe_options(options)
        lines.append("")
        lines.append(f"{role} parameters ({where}):")
        width = max((len(p.name) for p in params), default=4)
        type_width = min(max((len(p.type) for p in params), default=4), 40)
        for p in params:
            lines.append(f"  {p.name:<{width}}  {p.type:<{type_width}}  default {p.default}")
            if p.description:
                for line in textwrap.wrap(p.description, 96):
                    lines.append(f"  {'':<{width}}  {line}")
    return "\n".join(lines)


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def render_markdown(plugin: Plugin) -> str:
    """One markdown table per role: the manual's parameter reference for this store."""
    parts = [f"#### `{plugin.name}`", "", plugin.description]
    for role, options in roles(plugin):
        parts += ["", f"{role.capitalize()} (`{'source.params' if role == 'source' else 'destinations[].params'}`):",
                  "", "| parameter | type | default | description |", "| --- | --- | --- | --- |"]
        for p in describe_options(options):
            parts.append(f"| `{p.name}` | {_cell(p.type)} | `{_cell(p.default)}` | {_cell(p.description)} |")
    return "\n".join(parts)
