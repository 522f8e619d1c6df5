"""The postgres store's native Spark read (``spark_read``) over pgjdbc through the SQL kit's JDBC read
(:mod:`wormhole.plugins.sql.spark`), loaded in Spark mode only: columns whose JDBC value is not the local
reader's go through an expression, and a column none makes exact sends the read to the row reader
(docs/manual/spark.md says which)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from urllib.parse import quote as url_quote

import psycopg
from psycopg.sql import Literal
from pyspark.sql import Column as SparkColumn
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from wormhole.plugins.base import PushedQuery, Schema, Split
from wormhole.plugins.postgres.catalog import OUTPUT_TEXT, ColumnInfo
from wormhole.plugins.postgres.connection import SESSION_SETTINGS
from wormhole.plugins.postgres.dialect import POSTGRES
from wormhole.plugins.spark_kit import EXACT, RowReaderPlan
from wormhole.plugins.sql import quote
from wormhole.plugins.sql import spark as jdbc
from wormhole.plugins.sql.catalog import query_columns
from wormhole.plugins.sql.source_options import Endpoint, QuerySource, SqlSource

PG_DRIVER = "org.postgresql.Driver"

JDBC_EXACT_KINDS = frozenset({"int", "float", "bool", "bytes"})
"""Kinds (:mod:`.catalog`) Spark's JDBC read carries exactly as local mode reads them (measured with pgjdbc
42.5 and Spark 4); the others go through :func:`_expression` or to the row reader (docs/manual/spark.md)."""

_TEMPORAL_SPARK = {"date": T.DateType(), "datetime": T.TimestampNTZType(), "timestamptz": T.TimestampNTZType()}
_HIGH = {"date": "<= '9999-12-31'", "datetime": "< '10000-01-01'", "timestamptz": "< '10000-01-01'"}
_TEXT_TYPES = ("text", "character varying", "varchar", "character(", "bpchar")
"""Declared types pgjdbc hands as their text already (no ``format`` needed)."""


def jdbc_url(ep: Endpoint) -> str:
    return f"jdbc:postgresql://{ep.host}:{ep.port}/{url_quote(ep.database, safe='')}?ApplicationName=wormhole"


def _properties(ep: Endpoint, timeout_s: float) -> dict[str, str]:
    # fetchsize: pgjdbc streams with a cursor (Spark's dialect turns autocommit off) instead of holding a
    # whole partition in memory.
    return jdbc.properties(ep, PG_DRIVER, connectTimeout=str(max(1, round(timeout_s))),
                           sessionInitStatement="; ".join(s for s in SESSION_SETTINGS if "client_encoding" not in s))


def _why_inexact(info: ColumnInfo, first: tuple[int | None, int | None] | None, special_dates: str) -> str | None:
    """Why no expression makes a column's JDBC value the local reader's (None: one does)."""
    if info.kind == "decimal":
        if info.precision is None or info.scale is None:
            return "numeric without a declared scale"
        if info.scale > 18 or info.precision - info.scale > 20:
            return f"numeric({info.precision},{info.scale}) beyond decimal(38,18)"
        if first is not None and first != (info.precision, info.scale):
            return f"numeric({info.precision},{info.scale}) unlike the first table's"
    if info.kind in _TEMPORAL_SPARK and special_dates == "reject":
        return f"{info.type_name} with special_dates: reject"
    return None


def _expression(info: ColumnInfo) -> str | None:
    """What the JDBC query selects for a column (None: the column as it is)."""
    q = quote(info.name)
    if info.kind in JDBC_EXACT_KINDS:
        return None
    if info.kind == "float4":
        return f"CAST({q} AS double precision)"
    if info.kind == "decimal":
        return f"CAST({q} AS numeric({info.precision},{info.scale}))"
    if info.kind in _TEMPORAL_SPARK:
        value = f"({q} AT TIME ZONE 'UTC')" if info.kind == "timestamptz" else q
        return f"CASE WHEN {value} >= '0001-01-01' AND {value} {_HIGH[info.kind]} THEN CAST({value} AS text) END"
    if info.kind == "json":
        return f"CAST({q} AS text)"
    if info.kind == "array":
        return f"CAST(to_json({q}) AS text)"
    if info.type_name.startswith(_TEXT_TYPES):
        return None
    return OUTPUT_TEXT.format(q)


class _Plan(jdbc.PlanParts):
    """The columns of each relation a source reads (see :func:`_plan`), and what JDBC would not carry;
    the kit's :class:`~wormhole.plugins.sql.spark.JdbcPlan` of the source."""

    always_true = "TRUE"
    dialect = POSTGRES

    def __init__(self, source: SqlSource, schema: Schema) -> None:
        self.source = source
        self.first = {c.name.lower(): (c.precision, c.scale) for c in schema.columns if c.type == "decimal"}
        self.read = {name.lower() for name in schema.names}
        """The columns the splits read (a pushed-down projection leaves some out)."""
        self.columns: dict[tuple[int, str | None], list[ColumnInfo]] = {}
        self.awkward: list[str] = []
        self.where: str | None = None

    def add(self, key: tuple[int, str | None], infos: list[ColumnInfo]) -> None:
        self.columns[key] = infos
        for info in infos:
            if info.name.lower() not in self.read:
                continue
            why = _why_inexact(info, self.first.get(info.name.lower()), self.source.dates)
            shown = f"{info.name} ({why})"
            if why is not None and shown not in self.awkward:
                self.awkward.append(shown)

    def connection(self, key: jdbc.RelationKey) -> tuple[str, dict[str, str]]:
        ep = self.source.shards[key[0]].endpoint
        return jdbc_url(ep), _properties(ep, self.source.connect_timeout_s)

    def expression(self, key: jdbc.RelationKey, column: str) -> str | None:
        return _expression(self._info(key, column))

    def column(self, key: jdbc.RelationKey, column: str, selected: str | None) -> SparkColumn:
        info = self._info(key, column)
        if selected is None:
            return F.col(f"`{info.name}`")
        col = F.col(f"`{selected}`")
        if info.kind in _TEMPORAL_SPARK:
            return col.cast(_TEMPORAL_SPARK[info.kind]).alias(info.name)
        if info.kind in ("json", "array"):
            # JSON text: the writers get its values back, as the row reader's (its logical type stays json).
            return col.alias(info.name, metadata={EXACT: True})
        return col.alias(info.name)

    def extra(self, key: jdbc.RelationKey, predicates: Sequence[str]) -> str:
        # ctid is a system column, which * leaves out: block-range predicates need it by name.
        return ", ctid" if any("ctid" in p for p in predicates) and key[1] is not None else ""

    def _info(self, key: jdbc.RelationKey, column: str) -> ColumnInfo:
        return next(c for c in self.columns[key] if c.name == column)


def _plan(source: SqlSource, schema: Schema, pushed: PushedQuery | None) -> _Plan:
    """Each relation's columns (a query's under the key ``(shard, None)``), the awkward ones, and the
    pushed-down condition with its values as literals (Spark's JDBC predicates bind none)."""
    plan = _Plan(source, schema)
    for index, shard, conn in jdbc.shard_connections(POSTGRES, source):
        if plan.where is None and pushed is not None:
            plan.where = inline_where(pushed, conn)
        if isinstance(source, QuerySource):
            plan.add((index, None), query_columns(POSTGRES, conn, shard.endpoint, source.query))
            continue
        for table in shard.tables:
            infos = POSTGRES.describe_table(conn, shard, table)
            plan.add((index, POSTGRES.relation(shard, table)),
                     POSTGRES.choose_columns(infos, source.selection.columns, shard, table))
    return plan


def inline_where(pushed: PushedQuery, conn: psycopg.Connection[Any]) -> str | None:
    """The pushed-down condition with its bound values written in as PostgreSQL literals."""
    return jdbc.inline_where(pushed, lambda value: Literal(value).as_string(conn))


def exact_text(options: SqlSource, schema: Schema) -> frozenset[str]:
    """The columns :func:`read` carries as exact text (``wormhole plan`` says how each destination is written)."""
    plan = _plan(options, schema, None)
    if plan.awkward:
        return _wide_decimals(schema)
    texts = {info.name.lower() for infos in plan.columns.values() for info in infos if info.kind in ("json", "array")}
    return frozenset(name for name in schema.names if name.lower() in texts)


def read(spark: SparkSession, options: SqlSource, splits: list[Split],
         schema: Schema) -> DataFrame | RowReaderPlan:
    """One JDBC relation per shard table (or query), one partition per split, unioned by column name;
    the row reader per split (:class:`RowReaderPlan`) when a column would not travel exactly."""
    pushed: PushedQuery | None = splits[0].params.get("pushdown")
    plan = _plan(options, schema, pushed)
    if plan.awkward:
        return jdbc.not_carried(plan.awkward, _wide_decimals(schema))
    return jdbc.read(spark, plan, splits, schema)


def _wide_decimals(schema: Schema) -> frozenset[str]:
    """The row reader's columns that travel as exact text: decimals beyond decimal(38,18), a ``numeric`` of no
    declared scale among them (each value its own text, 1.50 or 1E-30, which Spark's decimal would round or
    refuse); the writers get each value back as local mode's do."""
    return frozenset(c.name for c in schema.columns if c.type == "decimal" and (
        c.precision is None or (c.scale or 0) > 18 or c.precision - (c.scale or 0) > 20))

