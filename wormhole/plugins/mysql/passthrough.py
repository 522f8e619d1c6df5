"""MySQL to MySQL without decoding (docs/manual/mysql.md, *Writing*): a column whose target declares exactly the
source's type (COLUMN_TYPE and character set, as :func:`native_type` writes them) takes its LOAD DATA field
from the reader's wire text, escaped, never parsed. Not FLOAT (read as ``CAST(col AS DOUBLE)``) nor BIT (raw
bytes); a batch decoded value by value or made by a transform carries no wire text. :func:`wire_columns`
decides for a writer and for ``wormhole plan`` alike."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pymysql

from wormhole.errors import PrepareError
from wormhole.plugins.base import WILL_FAIL
from wormhole.plugins.mysql.connection import connect, describe
from wormhole.plugins.mysql.dialect import MYSQL
from wormhole.plugins.schema import Schema
from wormhole.plugins.sql import backquote
from wormhole.plugins.sql.target import fetch_all, fetch_one

TYPED_ONLY = frozenset({"float", "bit"})
"""MySQL data types whose wire text is not what LOAD DATA reads back to the same value (see above)."""


def native_type(column_type: str, charset: str | None) -> str:
    """A column's declaration as passthrough compares it: ``varchar(40) utf8mb4``, ``int(11)``."""
    return column_type.lower() + (f" {charset.lower()}" if charset else "")


def target_columns(conn: pymysql.Connection, database: str, table: str) -> list[tuple[str, str, str]]:
    """``(name, DATA_TYPE, native type)`` of each column of ``table``, in order (empty: no such table)."""
    found = fetch_all(conn, "SELECT COLUMN_NAME, DATA_TYPE, COLUMN_TYPE, CHARACTER_SET_NAME "
                            "FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s "
                            "ORDER BY ORDINAL_POSITION", (database, table))
    return [(str(name), str(dt).lower(), native_type(str(ctype), cs)) for name, dt, ctype, cs in found]


def wire_columns(schema: Schema, written: Sequence[str], targets: Mapping[str, str], method: str) -> tuple[bool, ...]:
    """For each column of ``schema`` (written to the target column of the same position in ``written``),
    whether its LOAD DATA field is the wire text: the source's declared type is the target's (``targets``:
    native type by lower-case name) and its text reads back exactly."""
    if method != "load_data":
        return (False,) * len(schema)
    out = []
    for column, name in zip(schema.columns, written, strict=True):
        native = column.native
        data_type = native.split("(")[0].split(" ")[0] if native else ""
        out.append(native is not None and data_type not in TYPED_ONLY and targets.get(name.lower()) == native)
    return tuple(out)


def load_method(method: str, schema: Schema, wire: Sequence[bool], rows_changed: bool = False) -> str:
    """What ``wormhole plan`` shows as a mysql destination's ``load``."""
    if method != "load_data":
        return "INSERT"
    if rows_changed or not any(wire):
        # Transforms make new rows, and Spark's rows cross processes: neither carries the reader's wire text.
        changed = " (the rows are not the reader's own: transforms, or Spark)"
        return "LOAD DATA from Arrow" + (changed if rows_changed and any(wire) else "")
    if all(wire):
        return "LOAD DATA from wire text"
    typed = [c.name for c, w in zip(schema.columns, wire, strict=True) if not w]
    return f"LOAD DATA from wire text ({sum(wire)} of {len(wire)} columns; Arrow for {', '.join(typed)})"


def choose_method(conn: pymysql.Connection, options: Any, local_infile: bool | None = None) -> str | None:
    """``load_data`` or ``insert`` as the writer's prepare chooses; None when ``method`` is
    ``load_data`` and the server has local_infile off (prepare fails then). ``local_infile``: the server's
    setting when the caller knows it (else asked on ``conn``)."""
    if options.method == "insert" or (options.method == "auto" and options.write_mode == "upsert"):
        return "insert"
    if local_infile is None:
        local_infile = bool(int(fetch_one(conn, "SELECT @@GLOBAL.local_infile")[0]))
    if local_infile:
        return "load_data"
    return None if options.method == "load_data" else "insert"


def plan_load(options: Any, schema: Schema, rows_changed: bool) -> str:
    """The ``load`` line of ``wormhole plan`` for a mysql destination: its target's column types read
    (nothing written) and decided as the writer decides."""
    endpoint = options.endpoint
    try:
        conn = connect(endpoint, PrepareError, attempts=1, timeout=options.connect_timeout_s, strict=options.strict)
    except PrepareError as exc:
        return f"unknown (the target cannot be reached: {exc})"
    try:
        method = choose_method(conn, options)
        found = target_columns(conn, endpoint.database, options.table)
    except pymysql.err.MySQLError as exc:
        return f"unknown (reading the target's columns failed: {describe(exc)})"
    finally:
        MYSQL.close_quietly(conn)
    if method is None:
        return "none (method 'load_data' needs local_infile, which the server has switched off)"
    if not found:
        # prepare fails on a missing target (a single-table task creates no mysql table): say so now, not at the run
        why = ("create_table on a mysql destination needs a database task (source.params.tables) for now"
               if options.create_table else "the mysql store creates no table: create it first")
        return (f"{WILL_FAIL}: table {backquote(endpoint.database)}.{backquote(options.table)} does not exist on "
                f"{endpoint.mark} ({why})")
    written = options.columns if options.columns is not None else schema.names
    if len(written) != len(schema):
        return "unknown (the target's columns do not match the source's: prepare will say why)"
    wire = wire_columns(schema, written, {name.lower(): native for name, _, native in found}, method)
    return load_method(method, schema, wire, rows_changed)
