"""The mysql store's source role: reachability and size, DataX-style key-range splits, streaming reads.

Splitting follows DataX's SingleTableSplitUtil: ``MIN``/``MAX`` of ``split_pk`` (an integer or a
string column), ranges that are half-open except the last, which is closed, plus one split for
``split_pk IS NULL`` when the column is nullable; each range is read ``ORDER BY split_pk``, never
paged with LIMIT/OFFSET. String boundaries are interpolated in ASCII like DataX's, then sorted and
de-duplicated by the server under the column's own collation, so the ranges are disjoint and
cover every key whatever the collation (DataX compares in Java order and can lose or repeat rows
under a case-insensitive collation).

Reads stream (unbuffered cursor) and parse rows column-major off the wire (:mod:`.protocol`);
values are converted a column at a time. A value the reader cannot convert rejects its row to the
dirty-record file (origin ``source``) instead of failing the split.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pymysql
import pymysql.cursors
import structlog

from wormhole.errors import ReadError, SplitError, StorageError
from wormhole.plugins.base import Column, ReadContext, Rejected, Row, Schema, SourceInfo, Split
from wormhole.plugins.mysql.connection import (
    PLUGIN_NAME,
    Endpoint,
    abandon,
    close_quietly,
    connect,
    describe,
    fetch_all,
    fetch_one,
)
from wormhole.plugins.mysql.options import MysqlReaderOptions, quote
from wormhole.plugins.mysql.protocol import column_batches
from wormhole.plugins.mysql.types import (
    JSON_CHECK,
    KIND_TYPES,
    READ_CONVERTERS,
    ZeroDate,
    convert_column,
    kind_of_data_type,
    kind_of_field,
)

_INT_KINDS = ("tinyint", "smallint", "mediumint", "int", "integer", "bigint")
_STRING_KINDS = ("char", "varchar", "tinytext", "text", "mediumtext", "longtext")
_SAFE_NAME = re.compile(r"[A-Za-z0-9_]+")
_ARG = "\x00wh-arg\x00"
log = structlog.get_logger("wormhole.mysql")


def endpoints(options: MysqlReaderOptions) -> list[tuple[Endpoint, tuple[str, ...]]]:
    """Every (endpoint, tables) the source reads; tables is empty for a ``query`` source."""
    if options.connections is None:
        assert options.database is not None  # check() requires it
        ep = Endpoint(options.host, options.port, options.user, options.password, options.password_env,
                      options.database)
        return [(ep, () if options.table is None else (options.table,))]
    out = []
    for c in options.connections:
        # The user and the secret default separately; a connection's password or password_env
        # replaces the source's pair as a whole.
        own_secret = c.password is not None or c.password_env is not None
        ep = Endpoint(c.host, c.port, c.user or options.user,
                      c.password if own_secret else options.password,
                      c.password_env if own_secret else options.password_env, c.database)
        out.append((ep, c.tables or ()))
    return out


@dataclass(frozen=True, slots=True)
class ColumnInfo:
    name: str
    kind: str
    data_type: str
    nullable: bool
    charset: str | None
    collation: str | None


def describe_table(conn: pymysql.Connection, ep: Endpoint, table: str) -> list[ColumnInfo]:
    """The columns of ``table`` in order; SplitError naming it when it does not exist."""
    found = fetch_all(conn, "SELECT COLUMN_NAME, DATA_TYPE, IS_NULLABLE, CHARACTER_SET_NAME, COLLATION_NAME "
                            "FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s "
                            "ORDER BY ORDINAL_POSITION", (ep.database, table))
    if not found:
        raise SplitError(f"table {quote(table)} does not exist in {ep.mark}", plugin=PLUGIN_NAME)
    json_columns: set[str] = set()
    if any(str(r[1]).lower() == "longtext" for r in found):
        checks = fetch_all(conn, "SELECT CHECK_CLAUSE FROM information_schema.CHECK_CONSTRAINTS "
                                 "WHERE CONSTRAINT_SCHEMA = %s AND TABLE_NAME = %s", (ep.database, table))
        for (clause,) in checks:
            json_columns.update(m.replace("``", "`").lower() for m in JSON_CHECK.findall(str(clause)))
    return [ColumnInfo(name=str(name), kind=kind_of_data_type(str(dt), str(name).lower() in json_columns),
                       data_type=str(dt).lower(), nullable=nullable == "YES", charset=cs, collation=coll)
            for name, dt, nullable, cs, coll in found]


def choose_columns(infos: list[ColumnInfo], wanted: Sequence[str] | None, ep: Endpoint,
                   table: str) -> list[ColumnInfo]:
    if wanted is None:
        return infos
    by_name = {c.name.lower(): c for c in infos}
    unknown = [w for w in wanted if w.lower() not in by_name]
    if unknown:
        raise SplitError(f"table {quote(table)} in {ep.mark} has no column {', '.join(unknown)}", plugin=PLUGIN_NAME)
    return [by_name[w.lower()] for w in wanted]


def describe_query(conn: pymysql.Connection, query: str) -> list[tuple[str, str]]:
    """``(name, kind)`` of each column a query returns, from its result metadata (no rows read)."""
    with conn.cursor() as cur:
        cur.execute(f"SELECT * FROM ({query}) AS wh_q LIMIT 0")
        fields = cur._result.fields if cur._result is not None else []
        return [(str(f.name), kind_of_field(f.type_code, f.charsetnr)) for f in fields]


def _meta_connection(options: MysqlReaderOptions, ep: Endpoint, error: type[StorageError]) -> pymysql.Connection:
    return connect(ep, error, attempts=options.connect_retries, timeout=options.connect_timeout_s)


class MysqlReaderPeriphery:
    """Reachability of every connection (bounded retry) and an estimate of the rows to read."""

    def __init__(self, options: MysqlReaderOptions, ctx: ReadContext) -> None:
        self.options = options
        self.ctx = ctx

    def prepare(self) -> SourceInfo:
        rows: int | None = 0
        size: int | None = 0
        for ep, tables in endpoints(self.options):
            conn = _meta_connection(self.options, ep, ReadError)
            try:
                r, b = self._estimate(conn, ep, tables)
            finally:
                close_quietly(conn)
            rows = None if rows is None or r is None else rows + r
            size = None if size is None or b is None else size + b
        return SourceInfo(estimated_rows=rows, estimated_bytes=size)

    def _estimate(self, conn: pymysql.Connection, ep: Endpoint, tables: tuple[str, ...]) -> tuple[int | None,
                                                                                                 int | None]:
        opts = self.options
        if opts.estimate == "none":
            return None, None
        if opts.estimate == "stats" and tables and opts.where is None:
            marks = ", ".join(["%s"] * len(tables))
            found = fetch_one(conn, f"SELECT SUM(TABLE_ROWS), SUM(DATA_LENGTH) FROM information_schema.TABLES "
                                    f"WHERE TABLE_SCHEMA = %s AND TABLE_NAME IN ({marks})", (ep.database, *tables))
            return (None if found[0] is None else int(found[0])), (None if found[1] is None else int(found[1]))
        if opts.estimate == "stats":
            return None, None  # a where or a query: statistics say nothing about the rows selected
        total = 0
        sources = [f"SELECT * FROM ({opts.query}) AS wh_q"] if opts.query else \
            [f"SELECT * FROM {quote(ep.database)}.{quote(t)}" + (f" WHERE ({opts.where})" if opts.where else "")
             for t in tables]
        for sql in sources:
            try:
                found = fetch_one(conn, self._with_timeout(conn, f"SELECT COUNT(*) FROM ({sql}) AS wh_c"))
            except pymysql.err.MySQLError as exc:
                # Too slow (max_statement_time) or not countable: the estimate is only a hint.
                log.warning("reader.estimate_skipped", resource=ep.mark, reason=describe(exc))
                return None, None
            total += int(found[0])
        return total, None

    def _with_timeout(self, conn: pymysql.Connection, sql: str) -> str:
        seconds = self.options.count_timeout_s
        if "mariadb" in conn.get_server_info().lower():
            return f"SET STATEMENT max_statement_time = {seconds:g} FOR {sql}"
        return sql.replace("SELECT", f"SELECT /*+ MAX_EXECUTION_TIME({int(seconds * 1000)}) */", 1)


class MysqlSplitter:
    def __init__(self, options: MysqlReaderOptions, ctx: ReadContext) -> None:
        self.options = options
        self.ctx = ctx

    def split(self, advice: int) -> list[Split]:
        opts = self.options
        shards = endpoints(opts)
        splits: list[Split] = []
        if opts.query is not None:
            for index, (ep, _) in enumerate(shards):
                conn = _meta_connection(opts, ep, SplitError)
                try:
                    kinds = [k for _, k in self._query_columns(conn, ep)]
                finally:
                    close_quietly(conn)
                splits.append(Split(id=f"{ep.mark}/query", resource_mark=ep.mark,
                                    params={"shard": index, "sql": opts.query, "args": (), "kinds": tuple(kinds),
                                            "relation": f"({opts.query}) wormhole_query", "predicate": None}))
            return splits
        table_count = sum(len(tables) for _, tables in shards)
        per_table = math.ceil(advice / table_count)
        if table_count == 1 and opts.split_pk is not None:
            per_table *= opts.split_factor  # DataX: small splits so one slow range does not drag the end
        reference: list[tuple[str, str]] | None = None
        for index, (ep, tables) in enumerate(shards):
            conn = _meta_connection(opts, ep, SplitError)
            try:
                for table in tables:
                    infos = describe_table(conn, ep, table)
                    chosen = choose_columns(infos, opts.columns, ep, table)
                    shape = [(c.name.lower(), KIND_TYPES[c.kind]) for c in chosen]
                    if reference is None:
                        reference = shape
                    elif shape != reference:
                        raise SplitError(f"table {quote(table)} in {ep.mark} has columns {_show(shape)}, unlike "
                                         f"the first table's {_show(reference)}", plugin=PLUGIN_NAME)
                    splits.extend(self._table_splits(conn, index, ep, table, infos, chosen, per_table))
            finally:
                close_quietly(conn)
        return splits

    def _query_columns(self, conn: pymysql.Connection, ep: Endpoint) -> list[tuple[str, str]]:
        try:
            return describe_query(conn, self.options.query or "")
        except pymysql.err.MySQLError as exc:
            raise SplitError(f"the query fails on {ep.mark}: {describe(exc)}", plugin=PLUGIN_NAME) from exc

    def _table_splits(self, conn: pymysql.Connection, index: int, ep: Endpoint, table: str,
                      infos: list[ColumnInfo], chosen: list[ColumnInfo], count: int) -> list[Split]:
        opts = self.options
        select = f"SELECT {', '.join(quote(c.name) for c in chosen)} FROM {quote(ep.database)}.{quote(table)}"
        where = f"({opts.where})" if opts.where else None
        kinds = tuple(c.kind for c in chosen)
        base_id = f"{ep.mark}/{table}"

        def make(suffix: str, condition: str | None, args: tuple[Any, ...], order: str | None) -> Split:
            conditions = [c for c in (where, condition) if c]
            # Spark's JDBC read takes one literal predicate per partition; the values are escaped
            # by this connection, so they follow its character set.
            predicate = " AND ".join(conditions) or None
            for arg in args:
                assert predicate is not None
                predicate = predicate.replace(_ARG, conn.escape(arg), 1)
            sql = select + (f" WHERE {' AND '.join(conditions)}" if conditions else "")
            if order:
                sql += f" ORDER BY {order}"
            if args:  # the driver formats with %: a % in the task's where or a name must stay literal
                sql = sql.replace("%", "%%").replace(_ARG, "%s")
            return Split(id=base_id + suffix, resource_mark=ep.mark,
                         params={"shard": index, "sql": sql, "args": args, "kinds": kinds,
                                 "relation": f"{quote(ep.database)}.{quote(table)}", "predicate": predicate,
                                 "columns": tuple(c.name for c in chosen)})

        if opts.split_pk is None:
            return [make("", None, (), None)]
        by_name = {c.name.lower(): c for c in infos}
        pk = by_name.get(opts.split_pk.lower())
        if pk is None:
            raise SplitError(f"split_pk {opts.split_pk} is not a column of {quote(table)} in {ep.mark}",
                             plugin=PLUGIN_NAME)
        if pk.data_type not in _INT_KINDS and pk.data_type not in _STRING_KINDS:
            raise SplitError(f"split_pk {pk.name} of {quote(table)} in {ep.mark} is {pk.data_type.upper()}; only "
                             f"integer and string keys can be split (leave split_pk out to read the table as "
                             f"one split)", plugin=PLUGIN_NAME)
        if count <= 1:
            return [make("", None, (), None)]
        key = quote(pk.name)
        try:
            low, high = fetch_one(conn, f"SELECT MIN({key}), MAX({key}) FROM {quote(ep.database)}.{quote(table)}"
                                  + (f" WHERE {where}" if where else ""))
        except pymysql.err.MySQLError as exc:
            raise SplitError(f"cannot find the key range of {quote(table)} in {ep.mark}: {describe(exc)}",
                             plugin=PLUGIN_NAME) from exc
        if low is None:  # no non-NULL key (an empty table, or only NULL keys): one split reads it all
            return [make("", None, (), None)]
        if pk.data_type in _INT_KINDS:
            points: list[Any] = _int_points(int(low), int(high), count)
        else:
            points = self._string_points(conn, pk, str(low), str(high), count)
        splits = []
        for i in range(len(points) - 1):
            last = i == len(points) - 2
            op = "<=" if last else "<"
            splits.append(make(f"#{i}", f"{key} >= {_ARG} AND {key} {op} {_ARG}", (points[i], points[i + 1]), key))
        if len(points) == 1:  # one distinct key value
            splits.append(make("#0", f"{key} = {_ARG}", (points[0],), None))
        if pk.nullable:
            splits.append(make("#null", f"{key} IS NULL", (), None))
        return splits

    def _string_points(self, conn: pymysql.Connection, pk: ColumnInfo, low: str, high: str, count: int) -> list[str]:
        candidates = _ascii_points(low, high, count)[1:-1]
        if not candidates:
            return [low, high] if low != high else [low]
        charset, collation = pk.charset or "utf8mb4", pk.collation or "utf8mb4_general_ci"
        if not (_SAFE_NAME.fullmatch(charset) and _SAFE_NAME.fullmatch(collation)):
            raise SplitError(f"unexpected character set {charset!r} / collation {collation!r} of {pk.name}",
                             plugin=PLUGIN_NAME)
        value = f"CONVERT(%s USING {charset}) COLLATE {collation}"
        union = " UNION ALL ".join(f"SELECT {value} AS b" for _ in candidates)
        # The server orders and de-duplicates the candidates exactly as it will compare the keys.
        sql = f"SELECT DISTINCT b FROM ({union}) AS wh_b WHERE b > {value} AND b < {value} ORDER BY b"
        inner = [str(r[0]) for r in fetch_all(conn, sql, (*candidates, low, high))]
        if low == high:
            return [low]
        return [low, *inner, high]


def _show(shape: list[tuple[str, str]]) -> str:
    return ", ".join(f"{n} {t}" for n, t in shape)


def _int_points(low: int, high: int, count: int) -> list[int]:
    if low == high:
        return [low]
    points = sorted({low + (high - low) * i // count for i in range(count)} | {high})
    return points


_FIRST, _LAST = 32, 126
_RADIX = _LAST - _FIRST + 1


def _ascii_points(low: str, high: str, count: int) -> list[str]:
    """``count + 1`` strings from ``low`` to ``high`` spaced evenly as base-95 numbers (printable
    ASCII; other characters are clamped). Only a hint: the server orders them afterwards."""
    width = max(len(low), len(high), 1)

    def number(s: str) -> int:
        n = 0
        for ch in s.ljust(width, chr(_FIRST))[:width]:
            n = n * _RADIX + (min(max(ord(ch), _FIRST), _LAST) - _FIRST)
        return n

    def text(n: int) -> str:
        chars = []
        for _ in range(width):
            n, digit = divmod(n, _RADIX)
            chars.append(chr(digit + _FIRST))
        return "".join(reversed(chars)).rstrip(chr(_FIRST)) or chr(_FIRST)

    a, b = number(low), number(high)
    if a >= b:
        return [low, high]
    points = [text(a + (b - a) * i // count) for i in range(1, count)]
    return [low, *points, high]


class MysqlReader:
    """Streams the rows of each split (one connection per split, closed after it)."""

    def __init__(self, options: MysqlReaderOptions, ctx: ReadContext) -> None:
        self.options = options
        self.ctx = ctx
        self._shards = endpoints(options)

    def schema(self) -> Schema:
        opts = self.options
        ep, tables = self._shards[0]
        conn = _meta_connection(opts, ep, SplitError)
        try:
            if opts.query is not None:
                try:
                    cols = describe_query(conn, opts.query)
                except pymysql.err.MySQLError as exc:
                    raise SplitError(f"the query fails on {ep.mark}: {describe(exc)}", plugin=PLUGIN_NAME) from exc
                return Schema(tuple(Column(name, KIND_TYPES[kind]) for name, kind in cols))
            chosen = choose_columns(describe_table(conn, ep, tables[0]), opts.columns, ep, tables[0])
            return Schema(tuple(Column(c.name, KIND_TYPES[c.kind], c.nullable) for c in chosen))
        finally:
            close_quietly(conn)

    def read(self, split: Split) -> Iterator[Sequence[Row]]:
        ep, _ = self._shards[split.params["shard"]]
        kinds: tuple[str, ...] = split.params["kinds"]
        conn = connect(ep, ReadError, attempts=self.options.connect_retries, timeout=self.options.connect_timeout_s,
                       raw=True)
        finished = False
        cur = None
        try:
            cur = conn.cursor(pymysql.cursors.SSCursor)
            try:
                cur.execute(split.params["sql"], split.params["args"] or None)
                for count, columns in column_batches(cur, self.ctx.batch_rows):
                    if len(columns) != len(kinds):
                        raise ReadError(f"split {split.id} returned {len(columns)} columns, expected {len(kinds)}",
                                        plugin=PLUGIN_NAME)
                    rows = self._convert(split, kinds, count, columns)
                    if rows:
                        yield rows
            except pymysql.err.MySQLError as exc:
                raise ReadError(f"reading {split.id} failed: {describe(exc)}", plugin=PLUGIN_NAME,
                                split_id=split.id) from exc
            finished = True
        finally:
            # After an early stop (or a killed connection) the stream is mid-result: closing the
            # connection is the only clean way out (draining it could take as long as the rest of the read).
            if finished:
                close_quietly(conn)
            else:
                abandon(conn, cur)

    def _convert(self, split: Split, kinds: tuple[str, ...], count: int, columns: list[list[Any]]) -> list[Row]:
        bad: dict[int, str] = {}
        for i, kind in enumerate(kinds):
            try:
                columns[i] = convert_column(kind, columns[i])
            except (ValueError, ArithmeticError, UnicodeDecodeError):
                columns[i] = self._convert_slowly(kind, columns[i], bad, i)
        rows: list[Row] = list(zip(*columns, strict=True))
        if bad:
            rejected = [Rejected(rows[r], reason) for r, reason in sorted(bad.items())]
            self.ctx.dirty.reject("source", rejected, split.id)
            rows = [row for r, row in enumerate(rows) if r not in bad]
        return rows

    def _convert_slowly(self, kind: str, values: list[Any], bad: dict[int, str], index: int) -> list[Any]:
        fn = READ_CONVERTERS[kind]
        assert fn is not None
        policy = self.options.zero_dates
        out: list[Any] = []
        for r, v in enumerate(values):
            if v is None:
                out.append(None)
                continue
            try:
                out.append(fn(v))
            except ZeroDate as exc:
                if policy == "keep":
                    out.append(str(exc))
                elif policy == "null":
                    out.append(None)
                else:
                    bad.setdefault(r, f"column {index}: zero date {exc} has no value (zero_dates is 'reject')")
                    out.append(None)
            except (ValueError, ArithmeticError, UnicodeDecodeError) as exc:
                bad.setdefault(r, f"column {index}: cannot read {v[:40]!r} as {kind}: {exc}")
                out.append(None)
        return out

