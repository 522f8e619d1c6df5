"""A task spec's JSON text into a document: anything an upstream system wrote is refused with a message.

A spec comes from a file or a task row written by another system, so anything can be there: bytes
that are not UTF-8, NaN, numbers too large for a float, nesting deep enough to exhaust the
interpreter's stack, a key written twice in one object. Each is refused (InvalidTaskConfig, exit 204)
with its key path where it has one, never with a traceback.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from wormhole.errors import InvalidTaskConfig
from wormhole.options import Problems, join_path

MAX_DEPTH = 64
"""Deepest nesting a task spec may have; deeper documents are refused before anything walks them."""


def load_spec_json(text: str | bytes | None) -> Any:
    """The JSON document of a spec, or InvalidTaskConfig saying why it is not one."""
    if text is None:
        raise InvalidTaskConfig(["<root>: the spec is empty (NULL)"])
    if isinstance(text, (bytes, bytearray, memoryview)):
        try:
            text = bytes(text).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InvalidTaskConfig([f"<root>: not UTF-8 text: byte 0x{exc.object[exc.start]:02x} at offset "
                                     f"{exc.start} cannot be decoded"]) from None
    if not isinstance(text, str):
        raise InvalidTaskConfig([f"<root>: expected JSON text, got {type(text).__name__}"])
    text = text.removeprefix("\ufeff")  # a BOM written by some editors is not an error
    if not text.strip():
        raise InvalidTaskConfig(["<root>: the spec is empty"])
    depth = _nesting_depth(text)
    if depth > MAX_DEPTH:
        raise InvalidTaskConfig([f"<root>: nested {depth} levels deep; a task spec nests at most {MAX_DEPTH}"])
    try:
        duplicated: list[_Duplicated] = []
        raw = json.loads(text, parse_constant=_reject_constant, object_pairs_hook=_object_builder(duplicated))
        # "\ud800" escapes decode to lone surrogates: not text any store, file or terminal can take.
        json.dumps(raw, ensure_ascii=False).encode("utf-8")
        if duplicated:  # which value was meant is a guess: refused, each by its key path
            problems = Problems()
            _report_duplicates(raw, "", problems)
            raise InvalidTaskConfig(problems.items)
        return raw
    except UnicodeEncodeError as exc:
        raise InvalidTaskConfig([f"<root>: a string holds a lone UTF-16 surrogate "
                                 f"({exc.object[exc.start:exc.end]!a}), which is not text"]) from None
    except json.JSONDecodeError as exc:
        raise InvalidTaskConfig([f"<root>: malformed JSON: {exc}"]) from None
    except ValueError as exc:  # NaN/Infinity, or an integer with too many digits
        raise InvalidTaskConfig([f"<root>: malformed JSON: {exc}"]) from None
    except RecursionError:  # unreachable after the depth check; kept so no input ever gives a traceback
        raise InvalidTaskConfig(["<root>: nested too deeply"]) from None


class _Duplicated(dict[str, Any]):
    """A JSON object whose text gave some keys more than once (the parser keeps the last)."""

    twice: tuple[str, ...] = ()


def _object_builder(found: list[_Duplicated]) -> Callable[[list[tuple[str, Any]]], dict[str, Any]]:
    def build(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        obj = dict(pairs)
        if len(obj) == len(pairs):
            return obj
        dup = _Duplicated(obj)
        keys = [k for k, _ in pairs]
        dup.twice = tuple(dict.fromkeys(k for k in keys if keys.count(k) > 1))
        found.append(dup)
        return dup
    return build


def _report_duplicates(node: Any, path: str, problems: Problems) -> None:
    """Each key given twice in one object, by its path (recursive: the depth is checked first)."""
    if isinstance(node, _Duplicated):
        for key in node.twice:
            problems.add(join_path(path, key), "is given more than once in one object")
    if isinstance(node, dict):
        for key, child in node.items():
            _report_duplicates(child, join_path(path, key), problems)
    elif isinstance(node, list):
        for i, child in enumerate(node):
            _report_duplicates(child, join_path(path, i), problems)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _nesting_depth(text: str) -> int:
    """The deepest bracket nesting outside strings, without recursion (the parser would recurse)."""
    depth = deepest = 0
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "]}":
            depth -= 1
    return deepest
