"""What the SQL stores' DDL dialects share (:mod:`wormhole.database.ddl`): reading a declared type's name and
arguments, the portable default expressions, names cut to a store's limit, the statements of a table built
from a few store hooks, and the session that applies them over a DB-API connection."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Sequence
from typing import Any

import structlog

from wormhole.database.model import IndexDef
from wormhole.plugins.ddl import (
    Default,
    PlannedColumn,
    PlannedForeignKey,
    SequenceStep,
    TableDdl,
    TablePlan,
    TableState,
    TargetName,
)

log = structlog.get_logger("wormhole")

_TYPE = re.compile(r"\s*(?P<name>[a-z_][a-z0-9_ ]*?)\s*(?:\((?P<args>.*)\))?\s*(?P<rest>(?:unsigned|zerofill|signed"
                   r"|\s)*)\s*", re.IGNORECASE | re.DOTALL)


def split_type(text: str) -> tuple[str, str | None, str]:
    """``(name, args, rest)`` of a declared type: ``int(10) unsigned`` is ``("int", "10", "unsigned")``, the name
    lower-cased, its spaces single (``double precision``); ``("", None, "")`` when it is no such text."""
    found = _TYPE.fullmatch(text)
    if found is None:
        return "", None, ""
    return " ".join(found["name"].lower().split()), found["args"], " ".join(found["rest"].lower().split())


def int_args(args: str | None) -> tuple[int, ...]:
    """The integers of a type's arguments (``12,2`` -> (12, 2)); () when they are not all integers."""
    if args is None:
        return ()
    parts = [p.strip() for p in args.split(",")]
    return tuple(int(p) for p in parts) if all(p.isdigit() for p in parts) else ()


def quoted_strings(args: str, backslashes: bool) -> tuple[str, ...] | None:
    """The values of a list of quoted strings (an enum's labels: ``'a','it''s'``); None when it is not one.
    ``backslashes``: a backslash escapes the next character (MySQL)."""
    out = []
    rest = args.strip()
    while rest:
        value, rest = _one_string(rest, backslashes)
        if value is None:
            return None
        out.append(value)
        rest = rest.lstrip()
        if rest.startswith(","):
            rest = rest[1:].lstrip()
        elif rest:
            return None
    return tuple(out)


_ESCAPES = {"0": "\0", "n": "\n", "r": "\r", "t": "\t", "b": "\b", "Z": "\x1a"}


def _one_string(text: str, backslashes: bool) -> tuple[str | None, str]:
    """The value of the quoted string ``text`` starts with and what follows it; (None, text) when it has none."""
    if not text.startswith("'"):
        return None, text
    out = []
    i = 1
    while i < len(text):
        ch = text[i]
        if ch == "\\" and backslashes and i + 1 < len(text):
            out.append(_ESCAPES.get(text[i + 1], text[i + 1]))
            i += 2
        elif ch == "'" and text[i + 1:i + 2] == "'":
            out.append("'")
            i += 2
        elif ch == "'":
            return "".join(out), text[i + 1:]
        else:
            out.append(ch)
            i += 1
    return None, text


def string_literal(value: str, backslashes: bool = False) -> str:
    """``value`` as a quoted SQL string; ``backslashes``: doubled too (MySQL without NO_BACKSLASH_ESCAPES)."""
    if backslashes:
        value = value.replace("\\", "\\\\")
    return "'" + value.replace("'", "''") + "'"


_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")
_NOW = re.compile(r"(?:current_timestamp|now|localtimestamp|sysdate)\s*(?:\(\s*\d*\s*\))?", re.IGNORECASE)
_TODAY = re.compile(r"current_date\s*(?:\(\s*\))?|curdate\s*\(\s*\)", re.IGNORECASE)
_CLOCK = re.compile(r"(?:current_time|curtime|localtime)\s*(?:\(\s*\d*\s*\))?", re.IGNORECASE)


def portable_default(text: str, backslashes: bool, cast: re.Pattern[str] | None = None) -> Default | None:
    """A default expression as a :class:`Default` when it is a literal or the current date/time (None: any other
    expression). ``cast`` matches a trailing type cast the store's catalog adds (PostgreSQL's ``::text``)."""
    text = text.strip()
    while text.startswith("(") and text.endswith(")"):  # sqlite and MySQL show some defaults parenthesized
        text = text[1:-1].strip()
    if cast is not None:
        text = cast.sub("", text).strip()
    if text.upper() == "NULL":
        return Default("null")  # PostgreSQL shows NULL::character varying
    if _NUMBER.fullmatch(text):
        return Default("number", text)
    if text.lower() in ("true", "false"):
        return Default("bool", text.lower())
    if text.startswith("'"):
        value, rest = _one_string(text, backslashes)
        return None if value is None or rest.strip() else Default("string", value)
    for pattern, kind in ((_NOW, "now"), (_TODAY, "today"), (_CLOCK, "clock")):
        if pattern.fullmatch(text):
            return Default(kind)  # type: ignore[arg-type]
    return None


def short_name(base: str, limit: int, measure: Callable[[str], int] = len) -> str:
    """``base`` when it fits ``limit`` (as ``measure`` counts: characters, or UTF-8 bytes for PostgreSQL), else
    its start and 8 hex digits of its hash, so two long names that share a start stay apart."""
    if measure(base) <= limit:
        return base
    digest = hashlib.sha1(base.encode()).hexdigest()[:8]
    head = base
    while measure(head) + 9 > limit:
        head = head[:-1]
    return f"{head}_{digest}"


def utf8_bytes(text: str) -> int:
    return len(text.encode())


class SqlDdl:
    """A SQL store's DDL dialect, less its type words: a table's statements from a few hooks (each store's
    class sets :attr:`name` and overrides what it spells its own way)."""

    name = ""
    backslashes = False
    """String literals escape backslashes (MySQL)."""
    name_limit = 63
    """The longest index or constraint name the store takes (``name_measure`` counts it)."""
    name_measure: Callable[[str], int] = staticmethod(len)
    index_per_table = False
    """Index names are the table's own (MySQL), not shared by every table of the schema."""
    fk_per_table = True
    """Foreign key names are the table's own (PostgreSQL), not the schema's (MySQL: the database's)."""
    cast: re.Pattern[str] | None = None

    def quote(self, identifier: str) -> str:
        raise NotImplementedError

    def qualified(self, target: TargetName) -> str:
        return self.quote(target.table) if target.schema is None else \
            f"{self.quote(target.schema)}.{self.quote(target.table)}"

    def columns_list(self, names: Sequence[str]) -> str:
        return ", ".join(self.quote(n) for n in names)

    # -- as a source ------------------------------------------------------------------------------

    def parse_default(self, default_sql: str) -> Default | None:
        return portable_default(default_sql, self.backslashes, self.cast)

    # -- as a destination -------------------------------------------------------------------------

    def render_default(self, default: Default, type_sql: str) -> str | None:
        if default.kind == "number":
            return default.value
        if default.kind == "string":
            return string_literal(default.value, self.backslashes)
        if default.kind == "bool":
            return "1" if default.value == "true" else "0"
        return {"now": "CURRENT_TIMESTAMP", "today": "CURRENT_DATE", "clock": "CURRENT_TIME"}.get(default.kind)

    def column_sql(self, column: PlannedColumn, plan: TablePlan) -> str:
        """A column's definition in CREATE TABLE."""
        sql = f"{self.quote(column.name)} {column.type_sql}"
        if not column.nullable:
            sql += " NOT NULL"
        if column.default_sql is not None:
            sql += f" DEFAULT {column.default_sql}"
        return sql

    def extra_definitions(self, plan: TablePlan, foreign_keys: bool) -> list[str]:
        """Definitions after the columns and the primary key (sqlite's foreign keys, a MySQL auto-increment's key)."""
        return []

    def table_suffix(self, plan: TablePlan) -> str:
        """What follows the closing parenthesis (MySQL's table options)."""
        return ""

    def comments(self, plan: TablePlan) -> list[str]:
        """Statements commenting the table and its columns (PostgreSQL's COMMENT ON)."""
        return []

    def index_name(self, plan: TablePlan, index: IndexDef) -> str:
        base = index.name if self.index_per_table else f"{plan.target.table}_{index.name}"
        return short_name(base, self.name_limit, self.name_measure)

    def index_statements(self, plan: TablePlan) -> list[str]:
        table = self.qualified(plan.target)
        return [f"CREATE {'UNIQUE ' if index.unique else ''}INDEX {self.quote(self.index_name(plan, index))} "
                f"ON {table} ({self.columns_list(index.columns)})" for index in plan.indexes]

    def fk_clause(self, fk: PlannedForeignKey) -> str:
        d = fk.definition
        sql = (f"FOREIGN KEY ({self.columns_list(d.columns)}) REFERENCES {self.qualified(fk.ref_target)} "
               f"({self.columns_list(d.ref_columns)})")
        if d.on_delete:
            sql += f" ON DELETE {d.on_delete.upper()}"
        if d.on_update:
            sql += f" ON UPDATE {d.on_update.upper()}"
        return sql

    def fk_statements(self, plan: TablePlan) -> list[str]:
        out = []
        for fk in plan.foreign_keys:
            base = fk.definition.name if self.fk_per_table else f"{plan.target.table}_{fk.definition.name}"
            name = short_name(base, self.name_limit, self.name_measure)
            out.append(f"ALTER TABLE {self.qualified(plan.target)} ADD CONSTRAINT {self.quote(name)} "
                       f"{self.fk_clause(fk)}")
        return out

    def sequences(self, plan: TablePlan) -> list[SequenceStep]:
        return []

    def lossy(self, plan: TablePlan) -> list[str]:
        """What this store keeps nowhere (sqlite: comments)."""
        return []

    def statements(self, plan: TablePlan, foreign_keys: bool) -> TableDdl:
        defs = [self.column_sql(c, plan) for c in plan.columns]
        key_later = bool(plan.primary_key) and self.key_after_load and not plan.key_during_load
        with_table = plan.indexes_with_table
        if plan.primary_key and not self.key_inline(plan) and (with_table or not key_later):
            defs.append(f"PRIMARY KEY ({self.columns_list(plan.primary_key)})")
        defs.extend(self.extra_definitions(plan, foreign_keys))
        inline = self.index_definitions(plan) if with_table else None
        defs.extend(inline or ())
        create = f"CREATE TABLE {self.qualified(plan.target)} ({', '.join(defs)}){self.table_suffix(plan)}"
        inline_fks = self.fks_inline()
        key = [f"ALTER TABLE {self.qualified(plan.target)} ADD PRIMARY KEY ({self.columns_list(plan.primary_key)})"]
        indexes = self.index_statements(plan)
        made = (create, *self.comments(plan), *(indexes if with_table and inline is None else ()))
        return TableDdl(plan.target, plan.columns, made,
                        after_load=(*(key if key_later else ()), *indexes),
                        foreign_keys=() if inline_fks else tuple(self.fk_statements(plan)),
                        sequences=tuple(self.sequences(plan)), lossy=tuple(self.lossy(plan)), indexed=with_table)

    def index_definitions(self, plan: TablePlan) -> list[str] | None:
        """The indexes as definitions inside CREATE TABLE (MySQL's ``KEY``); None: the store has no such form,
        its :meth:`index_statements` follow CREATE TABLE."""
        return None

    key_after_load = False
    """The primary key is added after the rows are in when the load does not need it (PostgreSQL: one sorted
    build instead of an index maintained row by row, as pgloader does); a clustered store (InnoDB) keeps it
    in CREATE TABLE."""

    def key_inline(self, plan: TablePlan) -> bool:
        """The primary key is declared with its column (sqlite's INTEGER PRIMARY KEY)."""
        return False

    def fks_inline(self) -> bool:
        """Foreign keys are declared in CREATE TABLE (sqlite cannot add them later)."""
        return False


def auto_column(plan: TablePlan) -> PlannedColumn | None:
    """The table's auto-increment column (a table has at most one)."""
    return next((c for c in plan.columns if c.auto_increment), None)


# -- applying -------------------------------------------------------------------------------------


class SqlDdlSession:
    """A :class:`~wormhole.database.ddl.DdlSession` over a DB-API connection in autocommit (sqlite: committed after
    each statement). ``columns_of(conn, target)`` lists a table's column names in order, None when there is
    no such table; ``fold``: the store's column names are alike ignoring case."""

    def __init__(self, conn: Any, columns_of: Callable[[Any, TargetName], list[str] | None], *, fold: bool,
                 plugin: str, commit: bool = False,
                 tables_of: Callable[[Any, Sequence[str]], list[tuple[str, str]]] | None = None) -> None:
        """``tables_of(conn, schemas)``: every (schema, table) there is in those schemas, in one statement (None:
        the store cannot say; :meth:`existing` is then None)."""
        self.conn = conn
        self._columns_of = columns_of
        self._tables_of = tables_of
        self._fold = fold
        self._plugin = plugin
        self._commit = commit

    def existing(self, targets: Sequence[TargetName]) -> set[TargetName] | None:
        """Which of ``targets`` are there (tables or views), asked in one statement for all (a database task's
        tables before their runs); None when the store cannot say so."""
        if self._tables_of is None or any(t.schema is None for t in targets):
            return None
        key: Callable[[str], str] = str.casefold if self._fold else str
        found = {(key(s), key(t)) for s, t in self._tables_of(self.conn, sorted({str(t.schema) for t in targets}))}
        return {t for t in targets if (key(str(t.schema)), key(t.table)) in found}

    def state(self, ddl: TableDdl) -> TableState:
        found = self._columns_of(self.conn, ddl.target)
        if found is None:
            return TableState("missing")
        wanted = [c.name for c in ddl.columns]
        key: Callable[[str], str] = str.casefold if self._fold else str
        if [key(n) for n in found] == [key(n) for n in wanted]:
            return TableState("same")
        differences = []
        missing = [n for n in wanted if key(n) not in {key(f) for f in found}]
        extra = [n for n in found if key(n) not in {key(w) for w in wanted}]
        if missing:
            differences.append(f"missing columns: {', '.join(missing)}")
        if extra:
            differences.append(f"columns the source has not: {', '.join(extra)}")
        if not missing and not extra:
            differences.append(f"columns in another order: {', '.join(found)} (the source: {', '.join(wanted)})")
        return TableState("differs", tuple(differences))

    def run(self, statements: Sequence[str]) -> None:
        for sql in statements:
            log.debug("ddl.statement", plugin=self._plugin, sql=sql)
            cur = self.conn.cursor()
            try:
                cur.execute(sql)
            finally:
                cur.close()
            if self._commit:
                self.conn.commit()

    def set_sequences(self, ddl: TableDdl) -> None:
        for step in ddl.sequences:
            sql = step.set_sql
            if step.max_sql is not None:
                cur = self.conn.cursor()
                try:
                    cur.execute(step.max_sql)
                    row = cur.fetchone()
                finally:
                    cur.close()
                sql = sql.replace("{next}", str(int(row[0]) if row and row[0] is not None else 1))
            self.run([sql])

    def close(self) -> None:
        self.conn.close()
