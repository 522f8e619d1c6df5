"""The SQL stores' native Spark read over JDBC, loaded in Spark mode only: what mysql's and postgres's
Spark adapters (``plugins/<store>/spark.py``) share, each supplying a :class:`JdbcPlan`.

One partition per split predicate (key or block ranges, the task's pushed-down filters ANDed as
literals: Spark's JDBC predicates bind no parameters), every shard and table (or query) its own
relation, unioned by name; the union says which split each partition is, for destinations that make
splits durable. A column whose JDBC value is not the one the local reader gives is selected through an
expression beside the relation's own columns (which stay for the split predicates and the task's
where), then renamed back. No predicate push-down by Spark: it would hand the task's filters to the
server as plain SQL, compared under the column's collation and not checked again; what goes to the
server is ``pushdown``, the SQL that means what Spark and local mode mean.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from functools import reduce
from typing import Any, Protocol

from pyspark.sql import Column as SparkColumn
from pyspark.sql import DataFrame, SparkSession

from wormhole.errors import SplitError
from wormhole.plugins.base import PARAM_MARK, PushedQuery, Schema, Split, with_split_order
from wormhole.plugins.spark_kit import RowReaderPlan
from wormhole.plugins.sql import resolve_password
from wormhole.plugins.sql.dialect import Dialect
from wormhole.plugins.sql.source_options import Endpoint, QuerySource, Shard, SqlSource

RelationKey = tuple[int, str | None]
"""A relation of a source: its shard's index and the table as SQL names it (None: the shard's query)."""


class JdbcPlan(Protocol):
    """One SQL store's answers for reading a source over JDBC (made by its adapter once per read)."""

    where: str | None
    """The pushed-down condition with its values written in as literals (None: none)."""
    always_true: str
    """The predicate of a split that has none (the store's spelling of true)."""

    def connection(self, key: RelationKey) -> tuple[str, dict[str, str]]:
        """The JDBC URL and connection properties of the relation's shard."""
        ...

    def base(self, key: RelationKey) -> tuple[str, bool]:
        """What the relation is selected from, and whether that is a query (which must be wrapped)."""
        ...

    def expression(self, key: RelationKey, column: str) -> str | None:
        """What the query selects for ``column`` in its place (None: the column as it is)."""
        ...

    def column(self, key: RelationKey, column: str, selected: str | None) -> SparkColumn:
        """The frame's column ``column``: ``selected`` names its expression's column (None: it has none)."""
        ...

    def quote(self, identifier: str) -> str:
        """``identifier`` quoted for the store's SQL."""
        ...

    def extra(self, key: RelationKey, predicates: Sequence[str]) -> str:
        """Columns the wrapped query selects beside ``*`` for the predicates (``, ctid``), or ''."""
        ...


class PlanParts:
    """What a store's :class:`JdbcPlan` spells alike: its dialect's quoting, a query source's relation (the
    query wrapped; a table's is its name), nothing selected beside ``*``."""

    dialect: Dialect
    source: SqlSource

    def quote(self, identifier: str) -> str:
        return self.dialect.quote(identifier)

    def base(self, key: RelationKey) -> tuple[str, bool]:
        if isinstance(self.source, QuerySource):
            return f"({self.source.query}) AS wh_q", True
        assert key[1] is not None
        return key[1], False

    def extra(self, key: RelationKey, predicates: Sequence[str]) -> str:
        return ""


def shard_connections(dialect: Dialect, source: SqlSource) -> Iterator[tuple[int, Shard, Any]]:
    """Each shard of ``source`` (its index) with a connection of its own, closed after it: a plan's catalog reads."""
    for index, shard in enumerate(source.shards):
        conn = dialect.open(shard.endpoint, SplitError, attempts=source.connect_retries,
                            timeout=source.connect_timeout_s)
        try:
            yield index, shard, conn
        finally:
            dialect.close_quietly(conn)


def properties(endpoint: Endpoint, driver: str, **more: str) -> dict[str, str]:
    """A relation's JDBC connection properties: the endpoint's credentials, rows streamed 10,000 at a time, and
    no predicate push-down by Spark (it would hand the task's filters to the server as plain SQL, compared
    under the column's collation: the kit sends ``pushdown``, which means what local mode means)."""
    return {"user": endpoint.user, "password": resolve_password(endpoint.password, endpoint.password_env),
            "driver": driver, "fetchsize": "10000", "preferTimestampNTZ": "true", "pushDownPredicate": "false",
            **more}


def read(spark: SparkSession, plan: JdbcPlan, splits: list[Split], schema: Schema) -> DataFrame:
    """One JDBC relation per shard table (or query), one partition per split, unioned by column name."""
    groups: dict[RelationKey, list[Split]] = {}
    for split in splits:
        groups.setdefault((split.params["shard"], split.params.get("relation")), []).append(split)
    frames = [_relation(spark, plan, key, members, schema) for key, members in groups.items()]
    # The union's partitions are the groups' in turn: say which split each is (resumable writes).
    return with_split_order(reduce(lambda a, b: a.unionByName(b), frames),
                            [s.id for members in groups.values() for s in members])


def _relation(spark: SparkSession, plan: JdbcPlan, key: RelationKey, members: list[Split],
              schema: Schema) -> DataFrame:
    """One table (or query) of one shard over JDBC, a partition per split: the expressions beside the
    relation's own columns under new names, Spark selecting only the ones it needs (column pruning)."""
    columns: Sequence[str] = members[0].params["columns"]
    pushed: PushedQuery | None = members[0].params.get("pushdown")
    if pushed is not None:
        columns = [columns[k] for k in pushed.keep]
    predicates = [s.params.get("predicate") or plan.always_true for s in members]
    if plan.where is not None:
        predicates = [f"({p}) AND ({plan.where})" for p in predicates]
    exprs = {c: plan.expression(key, c) for c in columns}
    named = {c: f"__wh_{i}" for i, c in enumerate(columns) if exprs[c] is not None}
    table, query = plan.base(key)
    if named or query:
        texts = "".join(f", {exprs[c]} AS {plan.quote(n)}" for c, n in named.items())
        table = f"(SELECT *{plan.extra(key, predicates)}{texts} FROM {table}) AS wh_r"
    url, properties = plan.connection(key)
    frame = spark.read.jdbc(url, table, predicates=predicates, properties=properties)
    frame = frame.select([plan.column(key, c, named.get(c)) for c in columns])
    return frame.toDF(*schema.names)  # the names the reader's schema gives (case kept)


def inline_where(pushed: PushedQuery | None, literal: Callable[[Any], str]) -> str | None:
    """The pushed-down condition with each bound parameter written in by ``literal`` (a value as a literal
    of the store's SQL with the same meaning)."""
    if pushed is None or pushed.where is None:
        return None
    parts = pushed.where.split(PARAM_MARK)
    out = [parts[0]]
    for arg, part in zip(pushed.args, parts[1:], strict=True):
        out += [literal(arg), part]
    return "".join(out)


def not_carried(awkward: Sequence[str], exact: frozenset[str] = frozenset()) -> RowReaderPlan:
    """The row reader's plan when JDBC would not carry the columns ``awkward`` describes exactly."""
    shown = list(awkward[:6])
    more = f" and {len(awkward) - 6} more" if len(awkward) > 6 else ""
    return RowReaderPlan(f"JDBC would not carry {', '.join(shown)}{more} exactly", exact)
