"""Job variables: ``${name}`` placeholders in a task spec, resolved once when a run starts.

Every string value of the spec (never a key, a number or a boolean) may hold placeholders, whole
(``"${table}"``) or inside text (``"dt = '${bizdate}'"``); ``$${`` is a literal ``${``. A value comes
from, first to last: ``wormhole plan --task-id N -p`` (a look at the task with other values), the
task row's ``params`` (what ``run FILE -p`` and ``task submit FILE -p`` record, or an upstream INSERT
wrote), the built-ins. A name no source gives is a problem naming it and its JSON path (exit 204).

A resumed run uses the values the run it resumes used (recorded on the run row), never new ones: a
resumed window must be the crashed run's window.

Values come from upstream systems, so a value can never change what SQL text says: ``${name:type}``
checks a value's form (:data:`TYPES`), and in SQL text (a SQL store's ``where``, ``query``, pre/post/
rollback SQL, a transform's expression) each value is written as one literal where its placeholder
stands, or refused (``_Walk.sql``; ``${name:sql}`` is trusted text, unchecked).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from wormhole.errors import InvalidTaskConfig
from wormhole.options import SHOWN_CHARS, join_path
from wormhole.redaction import MASK, is_secret_key
from wormhole.spec_json import load_spec_json
from wormhole.sql_text import NUMBER, Span, escape_string, is_literal, scan, span_at, string_literal, structure

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


def resolve(document: Any, values: Mapping[str, str],
            dialect_of: Callable[[str], str | None] | None = None) -> Resolved:
    """Replace the placeholders of every string of ``document`` by ``values``; unresolved or badly
    named ones are problems by JSON path (the spec's depth was bounded when it was parsed).

    In SQL text (a SQL store's ``where``, ``query``, ``pre_sql``, ``post_sql``, ``rollback_sql``, and a
    transform's ``filter`` or ``derive``) a value is written as one literal of the store's dialect
    (``dialect_of(plugin)``, default the store's push-down dialect) or refused: see :func:`_Walk.sql`."""
    walk = _Walk(values, _sql_paths(document, dialect_of or _store_dialect))
    return Resolved(walk.node(document, "", secret=False), walk.used, frozenset(walk.secret), tuple(walk.problems))


_WORD = re.compile(r"[A-Za-z0-9_]+")
SQL_KEYS = ("where", "query", "pre_sql", "post_sql", "rollback_sql")
"""The params of a SQL store that are SQL text."""
EXPRESSION_OPS = ("filter", "derive")
"""The transforms whose strings are expressions."""

TYPES: dict[str, tuple[re.Pattern[str], str]] = {
    "int": (re.compile(r"[+-]?\d+"), "an integer (digits, an optional sign)"),
    "num": (NUMBER, "a number (like 12, -0.5, 1e3)"),
    "date": (re.compile(r"\d{4}-\d\d-\d\d"), "a date YYYY-MM-DD"),
    "ts": (re.compile(r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:\.\d{1,6})?"), "a timestamp YYYY-MM-DD HH:MM:SS[.ffffff]"),
    "str": (re.compile(r"[^\x00]*"), "a text without NUL characters"),
    "sql": (re.compile(r".*", re.S), "SQL text"),
}
"""``${name:type}``: what the value must look like. In SQL text ``int`` and ``num`` are written as they are,
``date``, ``ts`` and ``str`` as a quoted literal (escaped for the dialect), ``sql`` as it is, unchecked."""


def _store_dialect(plugin: str) -> str | None:
    from wormhole.plugins.registry import source  # plugins import this module's callers, not it

    try:
        return source(plugin).pushdown
    except Exception:  # an unknown or broken plugin: the spec's check names it; no SQL to guard here
        return None


def _sql_paths(document: Any, dialect_of: Callable[[str], str | None]) -> dict[str, str]:
    """The JSON paths of the spec's SQL texts and expressions, to their dialect."""
    paths: dict[str, str] = {}
    if not isinstance(document, dict):
        return paths
    stores: list[tuple[str, Any]] = [("source", document.get("source"))]
    destinations = document.get("destinations")
    if isinstance(destinations, list):
        stores += [(join_path("destinations", i), d) for i, d in enumerate(destinations)]
    _transform_paths(document.get("transforms"), "transforms", paths)
    for path, store in stores:
        if not isinstance(store, dict):
            continue
        _transform_paths(store.get("transforms"), join_path(path, "transforms"), paths)
        plugin, params = store.get("plugin"), store.get("params")
        dialect = dialect_of(plugin) if isinstance(plugin, str) and "${" not in plugin else None
        if dialect is not None and isinstance(params, dict):
            paths.update({join_path(join_path(path, "params"), k): dialect for k in SQL_KEYS if k in params})
    return paths


def _transform_paths(transforms: Any, path: str, paths: dict[str, str]) -> None:
    if isinstance(transforms, list):
        for i, op in enumerate(transforms):
            if isinstance(op, dict):
                paths.update({join_path(join_path(path, i), k): "expr" for k in EXPRESSION_OPS if k in op})


def _shown(value: str, secret: bool) -> str:
    return MASK if secret else repr(value if len(value) <= SHOWN_CHARS else value[:SHOWN_CHARS] + "...")


@dataclass(slots=True)
class _Slot:
    """One placeholder of a string: where it is, what it stands for, and (once known) its text."""

    start: int
    end: int
    name: str
    kind: str | None
    value: str | None
    text: str


class _Walk:
    def __init__(self, values: Mapping[str, str], sql_paths: Mapping[str, str]) -> None:
        self.values = values
        self.sql_paths = sql_paths
        self.used: dict[str, str] = {}
        self.secret: set[str] = set()
        self.problems: list[str] = []

    def node(self, node: Any, path: str, *, secret: bool, dialect: str | None = None) -> Any:
        dialect = self.sql_paths.get(path, dialect)
        if isinstance(node, dict):
            return {k: self.node(v, join_path(path, k), secret=secret or is_secret_key(k), dialect=dialect)
                    for k, v in node.items()}
        if isinstance(node, list):
            return [self.node(v, join_path(path, i), secret=secret, dialect=dialect) for i, v in enumerate(node)]
        if isinstance(node, str) and "${" in node:
            slots = [self.placeholder(m, path or "<root>", secret) for m in _PLACEHOLDER.finditer(node)]
            if dialect is not None:
                self.sql(node, slots, path, secret, dialect)
            return _joined(node, slots)
        return node

    def placeholder(self, match: re.Match[str], path: str, secret: bool) -> _Slot:
        escaped, inner = match.group(1), match.group(2)
        name, colon, typed = inner.partition(":")
        kind = typed if colon else None
        slot = _Slot(match.start(), match.end(), name, kind, None, match.group(0))
        if escaped:
            slot.text = "${" + inner + "}"  # $${x}: the literal text ${x}
            return slot
        if not NAME.fullmatch(name) or (kind is not None and kind not in TYPES):
            why = (f"has no type {kind!r} (types: {', '.join(TYPES)})" if NAME.fullmatch(name)
                   else "is not a variable name (letters, digits and _, then an optional :type; write $${ for a "
                        "literal ${)")
            self.problems.append(f"{path}: ${{{inner}}} {why}")
            return slot
        if name not in self.values:
            self.problems.append(f"{path}: unresolved variable ${{{name}}}: give it with -p {name}=VALUE or in "
                                 f"the task row's params (built-ins: {', '.join(BUILTINS)})")
            return slot
        value = self.used[name] = self.values[name]
        if secret:
            self.secret.add(name)
        if kind is not None and not _typed(kind, value):
            self.problems.append(f"{path}: ${{{inner}}} = {_shown(value, secret)} is not {TYPES[kind][1]}")
            return slot
        slot.value = slot.text = value
        return slot

    def sql(self, text: str, slots: list[_Slot], path: str, secret: bool, dialect: str) -> None:
        """Write each value of SQL ``text`` as one literal where its placeholder stands (in code, a string
        literal, a quoted name, a comment: found by lexing the text with neutral stand-ins), or refuse it;
        then check that the values left the text's literals and comments as the author wrote them."""
        skeleton = _joined(text, slots, stand_in="0")
        spans = scan(skeleton, dialect)
        shift, checked = 0, True
        for slot in slots:
            at = slot.start + shift
            shift += len("0" if slot.value is not None else slot.text) - (slot.end - slot.start)
            if slot.value is None:  # $${x}, or a problem already: its text stays as written
                continue
            if slot.kind == "sql":
                checked = False  # trusted SQL text: only a where's own check holds it
                continue
            glued = bool(_WORD.fullmatch(skeleton[at - 1:at] or " ") or _WORD.fullmatch(skeleton[at + 1:at + 2] or " "))
            problem = self.literal(slot, span_at(spans, at), dialect, glued)
            if problem is not None:
                self.problems.append(f"{path or '<root>'}: ${{{slot.name}}} = {_shown(slot.value, secret)} {problem}")
                checked = False
        # The value written in code as a string literal stands as one: '' in what the text should be.
        expected = _joined(text, slots, stand_in=lambda s: "''" if s.text.startswith(("'", '"')) else "0")
        if checked and structure(scan(_joined(text, slots), dialect)) != structure(scan(expected, dialect)):
            self.problems.append(f"{path or '<root>'}: with the variables' values the SQL text has other literals or "
                                 "comments than it was written with (a value after a - makes a -- comment): put a "
                                 "space around the placeholder")

    @staticmethod
    def literal(slot: _Slot, span: Span | None, dialect: str, glued: bool) -> str | None:
        """Set ``slot.text`` to the value written as one literal in ``span`` (None: code); or why it cannot be.
        A value of letters, digits and _ may also go on a name in code (``FROM events_${day}``, ``glued``)."""
        value = slot.value or ""
        if span is None:
            if slot.kind in ("date", "ts", "str"):
                slot.text = string_literal(value, dialect)
            elif slot.kind is None and not is_literal(value, dialect) and not (glued and _WORD.fullmatch(value)):
                return ("is not one SQL literal (a number or a quoted string): declare the placeholder's type "
                        f"(${{{slot.name}:int}}, :num, :date, :ts or :str) to have the value written as one")
            return None
        if span.kind == "string":
            if slot.kind is not None:
                slot.text = escape_string(value, dialect, span.mark)
            elif span.mark[-1] in value or ("\\" in value and (dialect == "mysql" or span.mark == "E'")):
                return (f"would end the string literal it stands in: declare it ${{{slot.name}:str}} to have it "
                        "escaped (inside the quotes, or without them for a whole literal)")
            return None
        closing = {"name": span.mark.replace("[", "]"), "dollar": "$", "comment": "\n"}[span.kind]
        if closing in value or "\r" in value or (span.kind == "comment" and ("*/" in value or "/*" in value)):
            return f"would end the {'quoted name' if span.kind != 'comment' else span.kind} it stands in"
        return None


def _typed(kind: str, value: str) -> bool:
    """``value`` is of the placeholder's type (a date or timestamp a real one)."""
    return bool(TYPES[kind][0].fullmatch(value)) and (kind not in ("date", "ts") or _valid_time(value))


def _valid_time(value: str) -> bool:
    try:
        datetime.fromisoformat(value)
    except ValueError:
        return False
    return True


def _joined(text: str, slots: list[_Slot], stand_in: str | Callable[[_Slot], str] | None = None) -> str:
    """``text`` with its placeholders replaced: by their texts, or by ``stand_in`` where a value is known."""
    parts, position = [], 0
    for slot in slots:
        if stand_in is None or slot.value is None:
            parts += [text[position:slot.start], slot.text]
        else:
            parts += [text[position:slot.start], stand_in if isinstance(stand_in, str) else stand_in(slot)]
        position = slot.end
    parts.append(text[position:])
    return "".join(parts)


def unset_environment(document: Any, path: str = "") -> list[str]:
    """Every ``*_env`` option of a resolved spec (the source's, each destination's, a transform's) naming an
    environment variable this process lacks, as problems by JSON path: ``validate`` and ``run FILE`` name
    them all at once (a run would stop at the first one it connects with)."""
    problems: list[str] = []
    if isinstance(document, dict):
        for key, value in document.items():
            at = join_path(path, key)
            if isinstance(key, str) and key.endswith("_env") and isinstance(value, str) and value:
                if value not in os.environ:
                    problems.append(f"{at}: environment variable {value} is not set")
            else:
                problems += unset_environment(value, at)
    elif isinstance(document, list):
        for i, value in enumerate(document):
            problems += unset_environment(value, join_path(path, i))
    return problems
