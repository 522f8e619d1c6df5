"""The mysql store's native Spark read (``spark_read``) over MariaDB Connector/J through the SQL kit's JDBC read
(:mod:`wormhole.plugins.sql.spark`), loaded in Spark mode only; a column JDBC would not carry exactly sends
the read to the row reader (docs/manual/spark.md). Spark 4 applies its MySQL dialect only to ``jdbc:mysql:``
URLs, hence the connector's ``permitMysqlScheme``."""

from __future__ import annotations

from datetime import date, datetime
from decimal import Decimal
from typing import Any

from pyspark.sql import Column as SparkColumn
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from wormhole.plugins.base import PushedQuery, Schema, Split
from wormhole.plugins.mysql.connection import answering_server
from wormhole.plugins.mysql.dialect import MYSQL
from wormhole.plugins.spark_kit import EXACT, EXACT_TEXT_TYPES, RowReaderPlan
from wormhole.plugins.sql import backquote as quote
from wormhole.plugins.sql import spark as jdbc
from wormhole.plugins.sql.source_options import QuerySource, Shard, SqlSource

MARIADB_DRIVER = "org.mariadb.jdbc.Driver"

_URL_OPTIONS = (
    "permitMysqlScheme",
    "tinyInt1isBit=false",  # TINYINT(1) is an integer, as in local mode
    "yearIsDateType=false",
    # Connector/J 2.7: multi-row INSERTs are ~2.5x faster than its bulk protocol here (make bench).
    "useBulkStmts=false",
    "rewriteBatchedStatements=true",
    "sessionVariables=time_zone='+00:00'",  # TIMESTAMP values copy unchanged, as in local mode
)


def jdbc_url(host: str, port: int, database: str) -> str:
    return f"jdbc:mysql://{host}:{port}/{database}?{'&'.join(_URL_OPTIONS)}"


_JDBC_EXACT_TYPES = frozenset({
    "tinyint", "smallint", "mediumint", "int", "integer", "bigint", "year", "double",
    "char", "varchar", "tinytext", "text", "mediumtext", "longtext", "enum", "set",
    "binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob"})
"""MySQL types Spark's JDBC read carries exactly as local mode reads them, measured with Connector/J 2.7
(BIGINT UNSIGNED and DECIMAL are checked apart). Not: DATE/DATETIME/TIMESTAMP (zero dates become NULL,
``2024-00-10`` becomes 2023-12-10, DATETIME ``1000-01-01`` becomes 1000-01-06), TIME (a timestamp),
FLOAT (the text protocol's 6 digits: read as a CAST to DOUBLE, as the row reader reads it), BIT(n) (its
text as bytes), JSON (local mode re-serialises the text), spatial and MariaDB's UUID/INET types."""


class _Plan:
    """What each column of the source's tables needs to travel exactly (see :func:`_plan`)."""

    def __init__(self, schema: Schema, keep_zero_dates: bool) -> None:
        self.schema = schema
        self.keep_zero_dates = keep_zero_dates
        self.exact: set[str] = set()
        self.awkward: set[str] = set()
        self.casts: dict[str, str] = {}
        """Lower-case column name -> the SQL type JDBC reads it as (a CAST in the query)."""

    def table(self, conn: Any, shard: Shard, table: str, columns: tuple[str, ...] | None) -> None:
        for col in MYSQL.choose_columns(MYSQL.describe_table(conn, shard, table), columns, shard, table):
            precision, scale = col.precision, col.scale
            name = next((c.name for c in self.schema.columns if c.name.lower() == col.name.lower()), col.name)
            wide_int = col.data_type == "bigint" and "unsigned" in col.column_type  # beyond 64 bits
            wide_decimal = col.kind == "decimal" and (precision is None or scale is None
                                                      or scale > 18 or precision - scale > 20)
            if col.kind in ("date", "datetime") and self.keep_zero_dates:
                # CAST(... AS CHAR) is the text the row reader gets, zero dates included.
                self.casts[col.name.lower()] = "CHAR"
                continue
            if col.kind == "float32":  # the stored single exactly, as the row reader selects it
                self.casts[col.name.lower()] = "DOUBLE"
                continue
            if col.kind in ("date", "datetime", "bit", "json") or wide_int or wide_decimal:
                # Zero dates kept as text; numbers beyond int64 or decimal(38,18), which the
                # writers then take or reject as in local mode; JSON string values.
                self.exact.add(name)
            elif col.kind == "decimal" or col.data_type in _JDBC_EXACT_TYPES:
                continue
            self.awkward.add(f"{col.name} {col.column_type}")

    def result(self) -> tuple[RowReaderPlan | None, dict[str, str]]:
        if not self.awkward:
            return None, self.casts
        texts = {c.name for c in self.schema.columns if c.type in EXACT_TEXT_TYPES}
        exact = self.exact | {c.name for c in self.schema.columns if self.casts.get(c.name.lower()) == "CHAR"}
        return jdbc.not_carried(sorted(self.awkward), frozenset(exact & texts)), {}


def _plan(source: SqlSource, schema: Schema) -> tuple[RowReaderPlan | None, dict[str, str]]:
    """``(None, casts)`` when every column of every table travels exactly over JDBC, the columns
    ``casts`` names (lower-case) as a CAST in the query (DATE and DATETIME to their text, FLOAT
    to DOUBLE); else the row reader's
    plan, with the columns that must travel as exact text (see :class:`RowReaderPlan`)."""
    if isinstance(source, QuerySource):
        # A query's columns say their kind only, not UNSIGNED or the decimal's size: every column
        # that may need it travels as text.
        texts = frozenset(c.name for c in schema.columns if c.type in EXACT_TEXT_TYPES)
        return RowReaderPlan("a query source (its column types are not known exactly)", texts), {}
    plan = _Plan(schema, keep_zero_dates=source.dates == "keep")
    for _, shard, conn in jdbc.shard_connections(MYSQL, source):
        for table in shard.tables:
            plan.table(conn, shard, table, source.selection.columns)
    return plan.result()


def exact_text(options: SqlSource, schema: Schema) -> frozenset[str]:
    """The columns :func:`read` carries as exact text (``wormhole plan`` says how each destination is written)."""
    plan, casts = _plan(options, schema)
    if plan is not None:
        return plan.exact
    return frozenset(c.name for c in schema.columns if casts.get(c.name.lower()) == "CHAR")


def read(spark: SparkSession, options: SqlSource, splits: list[Split], schema: Schema) -> DataFrame | RowReaderPlan:
    """One JDBC relation per shard table, one partition per split, unioned by column name; the row
    reader per split (:class:`RowReaderPlan`) when a column would not travel exactly over JDBC."""
    plan, casts = _plan(options, schema)
    if plan is not None:
        return plan
    pushed: PushedQuery | None = splits[0].params.get("pushdown")
    return jdbc.read(spark, _Jdbc(options, casts, jdbc.inline_where(pushed, literal)), splits, schema)


def literal(value: Any) -> str:
    """A bound parameter of pushed-down SQL as a MySQL literal of the same meaning (Spark's JDBC
    predicates take no parameters). Strings go as hex with their character set: nothing in them can
    end the literal."""
    if isinstance(value, bool) or value is None:
        raise TypeError(f"pushed-down SQL binds no {value!r}")  # sqlgen writes these inline
    if isinstance(value, (int, Decimal)):
        return str(value)
    if isinstance(value, float):
        return repr(value)  # finite: the parser refuses what a double cannot hold
    if isinstance(value, datetime):
        return f"'{value.isoformat(sep=' ')}'"
    if isinstance(value, date):
        return f"'{value.isoformat()}'"
    if isinstance(value, str):
        return f"_utf8mb4 X'{value.encode().hex()}'" if value else "_utf8mb4 ''"
    raise TypeError(f"pushed-down SQL binds no {type(value).__name__}")


class _Jdbc(jdbc.PlanParts):
    """The kit's :class:`~wormhole.plugins.sql.spark.JdbcPlan` of a table source (a query goes to the row reader:
    :func:`_plan`): dates as the text of a CAST, FLOAT as a DOUBLE (``casts``), the task's pushed-down filters
    (``where``) ANDed to each split's predicate."""

    always_true = "1=1"
    dialect = MYSQL

    def __init__(self, source: SqlSource, casts: dict[str, str], where: str | None) -> None:
        self.source = source
        self.casts = casts
        self.where = where

    def connection(self, key: jdbc.RelationKey) -> tuple[str, dict[str, str]]:
        ep = self.source.shards[key[0]].endpoint
        host, port = answering_server(ep)  # _plan connected to each shard here: a failover list's choice is known
        return jdbc_url(host, port, ep.database), jdbc.properties(ep, MARIADB_DRIVER)

    def expression(self, key: jdbc.RelationKey, column: str) -> str | None:
        cast = self.casts.get(column.lower())
        return None if cast is None else f"CAST({quote(column)} AS {cast})"

    def column(self, key: jdbc.RelationKey, column: str, selected: str | None) -> SparkColumn:
        if selected is None:
            return F.col(f"`{column}`")
        return F.col(f"`{selected}`").alias(column, metadata={EXACT: self.casts[column.lower()] == "CHAR"})
