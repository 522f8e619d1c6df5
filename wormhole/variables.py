"""Job variables: ``${name}`` placeholders in a task spec, resolved once when a run starts.

Every string value of the spec (never a key, a number or a boolean) may hold placeholders, whole
(``"${table}"``) or inside text (``"dt = '${bizdate}'"``); ``$${`` is a literal ``${``. A value comes
from, first to last: ``wormhole plan --task-id N -p`` (a look at the task with other values), the
task row's ``params`` (what ``run FILE -p`` and ``task submit FILE -p`` record, or an upstream INSERT
wrote), the built-ins. A name no source gives is a problem naming it and its JSON path (exit 204).

A resumed run uses the values the run it resumes used (recorded on the run row), never new ones: a
resumed window must be the crashed run's window.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from wormhole.errors import InvalidTaskConfig
from wormhole.options import join_path
from wormhole.redaction import MASK, is_secret_key
from wormhole.spec_json import load_spec_json

NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_PLACEHOLDER = re.compile(r"\$(\$?)\{([^{}]*)\}")
BUILTINS = ("run_date", "run_ts", "tick_date", "tick_ts")

__all__ = ["BUILTINS", "MASK", "Resolved", "builtin_values", "load_params", "parse_params", "resolve",
           "resolve_text", "values_for_run"]


def builtin_values(started: datetime, tick: datetime | None = None) -> dict[str, str]:
    """The built-ins of a run that starts at ``started`` (UTC), and the time of the schedule's tick a
    recurring task's run was claimed for (``tick``, UTC; else its start), as ``tick_ts`` and ``tick_date``."""
    tick = started if tick is None else tick  # a run no tick started (a task that runs once): its start
    return {"run_date": _utc(started).strftime("%Y-%m-%d"), "run_ts": _utc(started).strftime("%Y-%m-%d %H:%M:%S"),
            "tick_date": _utc(tick).strftime("%Y-%m-%d"), "tick_ts": _utc(tick).strftime("%Y-%m-%d %H:%M:%S")}


def _utc(at: datetime) -> datetime:
    return at.astimezone(UTC) if at.tzinfo is not None else at


def values_for_run(params: str | bytes | None, recorded: str | bytes | None,
                   started: datetime | None = None, tick: datetime | None = None) -> dict[str, str]:
    """The values a run's spec is resolved with: the built-ins of ``started`` (default now) and ``tick``,
    under the task row's ``params``, under the values ``recorded`` by the run it resumes (which win: a
    resumed run uses the crashed run's values). InvalidTaskConfig (exit 204) for unreadable params."""
    values = {**builtin_values(started or datetime.now(UTC), tick), **load_params(params)}
    values.update(load_params(recorded, where="the variables recorded by the resumed run"))
    return values


def parse_params(pairs: tuple[str, ...] | list[str]) -> dict[str, str]:
    """``name=value`` texts (``-p``), later ones winning; ValueError naming a bad one."""
    values: dict[str, str] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not NAME.fullmatch(name):
            raise ValueError(f"{pair!r} is not name=value with a name of letters, digits and _ "
                             "(not starting with a digit)")
        values[name] = value
    return values


def load_params(text: str | bytes | None, where: str = "the task row's params") -> dict[str, str]:
    """A stored params document: a JSON object of names to strings (numbers and booleans as their JSON
    text); NULL or empty is no params. InvalidTaskConfig (exit 204) for anything else."""
    if text is None or (isinstance(text, (str, bytes)) and not text.strip()):
        return {}
    try:
        doc = load_spec_json(text)
    except InvalidTaskConfig as exc:
        raise InvalidTaskConfig([f"params: {p}" for p in exc.problems], where=where) from None
    if not isinstance(doc, dict):
        raise InvalidTaskConfig([f"params: expected a JSON object of names to values, got {type(doc).__name__}"],
                                where=where)
    problems = [f"params.{k}: not a variable name" for k in doc if not NAME.fullmatch(k)]
    problems += [f"params.{k}: expected a string, number or boolean" for k, v in doc.items()
                 if v is None or isinstance(v, (dict, list))]
    if problems:
        raise InvalidTaskConfig(problems, where=where)
    return {k: v if isinstance(v, str) else json.dumps(v) for k, v in doc.items()}


@dataclass(frozen=True, slots=True)
class Resolved:
    """A spec's document with its placeholders replaced, the values it used, and what went wrong."""

    document: Any
    used: dict[str, str] = field(default_factory=dict)
    secret: frozenset[str] = frozenset()
    """Variables used under a secret key (a password): shown as ``***``."""
    problems: tuple[str, ...] = ()

    def check(self) -> Any:
        """The resolved document, or InvalidTaskConfig (exit 204) listing every problem."""
        if self.problems:
            raise InvalidTaskConfig(list(self.problems))
        return self.document

    def shown(self) -> dict[str, str]:
        """The values used, for a person: a secret one as ``***``."""
        return {k: MASK if k in self.secret else v for k, v in sorted(self.used.items())}


def resolve_text(text: str | bytes | None, values: Mapping[str, str]) -> Resolved:
    """:func:`resolve` on a spec's JSON text; a text that is no JSON is a problem, not an exception."""
    try:
        document = load_spec_json(text)
    except InvalidTaskConfig as exc:
        return Resolved(None, problems=tuple(exc.problems))
    return resolve(document, values)


def resolve(document: Any, values: Mapping[str, str]) -> Resolved:
    """Replace the placeholders of every string of ``document`` by ``values``; unresolved or badly
    named ones are problems by JSON path (the spec's depth was bounded when it was parsed)."""
    walk = _Walk(values)
    return Resolved(walk.node(document, "", secret=False), walk.used, frozenset(walk.secret), tuple(walk.problems))


class _Walk:
    def __init__(self, values: Mapping[str, str]) -> None:
        self.values = values
        self.used: dict[str, str] = {}
        self.secret: set[str] = set()
        self.problems: list[str] = []

    def node(self, node: Any, path: str, *, secret: bool) -> Any:
        if isinstance(node, dict):
            return {k: self.node(v, join_path(path, k), secret=secret or is_secret_key(k)) for k, v in node.items()}
        if isinstance(node, list):
            return [self.node(v, join_path(path, i), secret=secret) for i, v in enumerate(node)]
        if isinstance(node, str) and "${" in node:
            return _PLACEHOLDER.sub(lambda m: self.placeholder(m, path or "<root>", secret), node)
        return node

    def placeholder(self, match: re.Match[str], path: str, secret: bool) -> str:
        escaped, name = match.group(1), match.group(2)
        if escaped:
            return "${" + name + "}"  # $${x}: the literal text ${x}
        if not NAME.fullmatch(name):
            self.problems.append(f"{path}: ${{{name}}} is not a variable name (letters, digits and _; "
                                 "write $${ for a literal ${)")
            return match.group(0)
        if name not in self.values:
            self.problems.append(f"{path}: unresolved variable ${{{name}}}: give it with -p {name}=VALUE or in "
                                 f"the task row's params (built-ins: {', '.join(BUILTINS)})")
            return match.group(0)
        self.used[name] = self.values[name]
        if secret:
            self.secret.add(name)
        return self.values[name]
