"""The sqlite store's source role: one split per table, read-only connection, typed batches.

SQLite returns int, float, str, bytes and None; only the columns whose logical type differs
(decimal, bool, date, datetime, json) are converted, column by column over each batch.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from datetime import date, datetime
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

from wormhole.errors import ReadError, SplitError, StorageError
from wormhole.plugins.base import Column, ReadContext, Rejected, Row, Schema, SourceInfo, Split
from wormhole.plugins.sqlite.options import SqliteReaderOptions, logical_type, quote

PLUGIN_NAME = "sqlite"

CONVERSION_ERRORS = (ValueError, TypeError, ArithmeticError, RecursionError)


def connect_readonly(path: str, error: type[StorageError]) -> sqlite3.Connection:
    """A read-only connection: the source is never written, and a missing file is an error."""
    abspath = os.path.abspath(path)
    if not os.path.isfile(abspath):
        raise error(f"sqlite database {abspath} does not exist", plugin=PLUGIN_NAME)
    try:
        return sqlite3.connect(Path(abspath).as_uri() + "?mode=ro", uri=True, timeout=30)
    except sqlite3.Error as exc:
        raise error(f"cannot open sqlite database {abspath}: {exc}", plugin=PLUGIN_NAME) from exc


def table_columns(conn: sqlite3.Connection, table: str) -> list[tuple[str, str]]:
    """``(name, declared type)`` of each column of ``table``; empty when there is no such table."""
    return [(str(name), str(decl or "")) for name, decl in
            conn.execute("SELECT name, type FROM pragma_table_info(?) ORDER BY cid", (table,))]


def resolve_schema(conn: sqlite3.Connection, options: SqliteReaderOptions,
                   error: type[StorageError]) -> Schema:
    try:
        found = table_columns(conn, options.table)
    except sqlite3.Error as exc:
        raise error(f"cannot read the columns of {options.table} in {options.path}: {exc}",
                    plugin=PLUGIN_NAME) from exc
    if not found:
        raise error(f"table {options.table} does not exist in {options.path}", plugin=PLUGIN_NAME)
    if options.columns is None:
        chosen = found
    else:
        by_name = {name.lower(): (name, decl) for name, decl in found}
        unknown = [c for c in options.columns if c.lower() not in by_name]
        if unknown:
            raise error(f"table {options.table} in {options.path} has no column {', '.join(unknown)}",
                        plugin=PLUGIN_NAME)
        chosen = [by_name[c.lower()] for c in options.columns]
    return Schema(tuple(Column(name, logical_type(decl)) for name, decl in chosen))


# ---------------------------------------------------------------------------------------------
# Value conversion (SQLite value -> logical type)


def _to_decimal(v: Any) -> Decimal:
    try:
        # repr of a float is its shortest round-trip text: 0.1 reads as Decimal("0.1"), not 0.1000...055
        return Decimal(v if type(v) in (str, int) else repr(v))
    except InvalidOperation:
        raise ValueError(f"not a decimal: {v!r}") from None


_BOOL_TEXT = {"true": True, "false": False, "1": True, "0": False, "t": True, "f": False}


def _to_bool(v: Any) -> bool:
    if type(v) is int:
        return v != 0
    if type(v) is str and v.strip().lower() in _BOOL_TEXT:
        return _BOOL_TEXT[v.strip().lower()]
    raise ValueError(f"not a boolean: {v!r}")


def _to_json(v: Any) -> Any:
    if type(v) in (str, bytes):
        return json.loads(v)
    return v  # a number stored under NUMERIC affinity is already the JSON value


def _from_text(parse: Callable[[str], Any], what: str) -> Callable[[Any], Any]:
    def convert(v: Any) -> Any:
        if type(v) is str:
            return parse(v)
        raise TypeError(f"expected {what} text, got {type(v).__name__} {v!r}")

    return convert


_CONVERT: dict[str, Callable[[Any], Any]] = {
    "decimal": _to_decimal,
    "bool": _to_bool,
    "date": _from_text(date.fromisoformat, "ISO date"),
    "datetime": _from_text(datetime.fromisoformat, "ISO datetime"),
    "json": _to_json,
}


# ---------------------------------------------------------------------------------------------
# The source role


class SqliteSplitter:
    """The whole table (or the ``where`` selection) is one split: SQLite has a single reader file."""

    def __init__(self, options: SqliteReaderOptions, ctx: ReadContext) -> None:
        self.options = options

    def split(self, advice: int) -> list[Split]:
        conn = connect_readonly(self.options.path, SplitError)
        try:
            resolve_schema(conn, self.options, SplitError)  # fail here, before anything is written
        finally:
            conn.close()
        return [Split(id=f"sqlite:{self.options.table}",
                      resource_mark="sqlite:" + os.path.abspath(self.options.path))]


class SqliteReaderPeriphery:
    """Estimates rows cheaply.

    Without ``where``: ``MAX(rowid)``, one b-tree descent (exact unless rows were deleted); a
    ``WITHOUT ROWID`` table or a view falls back to ``COUNT(*)``. With ``where``: ``COUNT(*)`` of the
    selection, bounded by the engine's periphery timeout.
    """

    def __init__(self, options: SqliteReaderOptions, ctx: ReadContext) -> None:
        self.options = options

    def prepare(self) -> SourceInfo:
        opts = self.options
        conn = connect_readonly(opts.path, ReadError)
        try:
            resolve_schema(conn, opts, ReadError)
            table = quote(opts.table)
            if opts.where is None:
                try:
                    (rows,) = conn.execute(f"SELECT MAX(rowid) FROM {table}").fetchone()
                except sqlite3.OperationalError:
                    (rows,) = conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()
            else:
                (rows,) = conn.execute(f"SELECT COUNT(*) FROM {table} WHERE {opts.where}").fetchone()
        except sqlite3.Error as exc:
            raise ReadError(f"cannot count the rows of {opts.table} in {opts.path}: {exc}",
                            plugin=PLUGIN_NAME) from exc
        finally:
            conn.close()
        return SourceInfo(estimated_rows=int(rows or 0))


class SqliteReader:
    """Reads the table in batches of ``batch_rows`` with ``fetchmany``."""

    def __init__(self, options: SqliteReaderOptions, ctx: ReadContext) -> None:
        self.options = options
        self.ctx = ctx
        self._schema: Schema | None = None

    def schema(self) -> Schema:
        if self._schema is None:
            conn = connect_readonly(self.options.path, ReadError)
            try:
                self._schema = resolve_schema(conn, self.options, ReadError)
            finally:
                conn.close()
        return self._schema

    def read(self, split: Split) -> Iterator[Sequence[Row]]:
        schema = self.schema()
        opts = self.options
        sql = f"SELECT {', '.join(quote(n) for n in schema.names)} FROM {quote(opts.table)}"
        if opts.where is not None:
            sql += f" WHERE {opts.where}"
        fns = [(i, _CONVERT[c.type]) for i, c in enumerate(schema.columns) if c.type in _CONVERT]
        conn = connect_readonly(opts.path, ReadError)
        try:
            try:
                cursor = conn.execute(sql)
            except sqlite3.Error as exc:
                raise ReadError(f"cannot read {opts.table} from {opts.path}: {exc}",
                                plugin=PLUGIN_NAME) from exc
            while True:
                try:
                    raw = cursor.fetchmany(self.ctx.batch_rows)
                except sqlite3.Error as exc:
                    raise ReadError(f"cannot read {opts.table} from {opts.path}: {exc}",
                                    plugin=PLUGIN_NAME) from exc
                if not raw:
                    return
                if not fns:
                    yield raw
                    continue
                rows, rejected = self._convert(raw, fns, schema.names)
                if rejected:
                    self.ctx.dirty.reject("source", rejected, split.id)
                if rows:
                    yield rows
        finally:
            conn.close()

    def _convert(self, raw: list[Row], fns: list[tuple[int, Callable[[Any], Any]]],
                 names: tuple[str, ...]) -> tuple[list[Row], list[Rejected]]:
        try:
            cols: list[Sequence[Any]] = list(zip(*raw, strict=True))
            for i, fn in fns:
                cols[i] = [None if v is None else fn(v) for v in cols[i]]
            return list(zip(*cols, strict=True)), []
        except CONVERSION_ERRORS:
            pass  # find the bad rows one by one
        rows: list[Row] = []
        rejected: list[Rejected] = []
        for r in raw:
            out = list(r)
            for i, fn in fns:
                if out[i] is None:
                    continue
                try:
                    out[i] = fn(out[i])
                except CONVERSION_ERRORS as exc:
                    rejected.append(Rejected(tuple(r), f"{self.options.path}:{self.options.table}: column "
                                                       f"{names[i]}: {exc}"))
                    break
            else:
                rows.append(tuple(out))
        return rows, rejected
