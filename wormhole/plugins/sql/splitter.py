"""The splitter of a SQL store: one split per connection of a ``query`` source, else every table of every
shard described, checked to read as the first one does, and cut into splits by the store's cutter
(DataX's SingleTableSplitUtil: ``MIN``/``MAX`` of ``split_pk`` cut into near-equal key ranges, each store
with its own range SQL and key types, see :mod:`wormhole.plugins.sql` for the split points)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

from wormhole.errors import SplitError
from wormhole.plugins.base import ReadContext, Split
from wormhole.plugins.sql.catalog import CatalogColumn, Shape, find_column, query_columns, same_shape
from wormhole.plugins.sql.dialect import Dialect
from wormhole.plugins.sql.reader import table_columns
from wormhole.plugins.sql.snapshot import planning_session
from wormhole.plugins.sql.source_options import QuerySource, Selection, Shard, SqlSource

ColumnT = TypeVar("ColumnT", bound=CatalogColumn)


@dataclass(frozen=True, slots=True)
class TableCut:
    """One table of a shard being cut into splits; each store's cutter adds how its ranges read."""

    dialect: Dialect
    conn: Any
    index: int
    """The shard's index in the source (what a split's ``shard`` param holds)."""
    shard: Shard
    table: str
    selection: Selection
    chosen: list[Any]
    """The columns read, as the store's catalog describes them."""

    @property
    def relation(self) -> str:
        """The table as SQL names it."""
        return self.dialect.relation(self.shard, self.table)

    @property
    def label(self) -> str:
        """The table in messages: ``<name> in <host:port/database>``."""
        return f"{self.dialect.table_label(self.shard, self.table)} in {self.shard.endpoint.mark}"

    @property
    def where(self) -> str | None:
        """The task's ``where``, parenthesised to be ANDed with a split's own condition."""
        return f"({self.selection.where})" if self.selection.where else None

    @property
    def split_name(self) -> str:
        """The table in its splits' ids (``<host:port/database>/<split_name><suffix>``)."""
        return self.table

    def split(self, suffix: str, sql: str, args: tuple[Any, ...], predicate: str | None) -> Split:
        """A split of this table running ``sql`` with its bound ``args``; ``predicate``: its condition with the
        values written in (what ``wormhole plan`` shows, and what a JDBC read takes as a partition's)."""
        mark = self.shard.endpoint.mark
        return Split(id=f"{mark}/{self.split_name}{suffix}", resource_mark=mark,
                     params={"shard": self.index, "sql": sql, "args": args, "kinds": tuple(c.kind for c in self.chosen),
                             "columns": tuple(c.name for c in self.chosen), "relation": self.relation,
                             "predicate": predicate})

    def key_column(self, infos: list[ColumnT], split_pk: str, splittable: Callable[[ColumnT], bool],
                   declared: Callable[[ColumnT], str], kinds: str, otherwise: str) -> ColumnT:
        """The ``split_pk`` column; SplitError when there is none or its type cannot be cut."""
        pk = find_column(infos, split_pk)
        if pk is None:
            raise SplitError(f"split_pk {split_pk} is not a column of {self.label}", plugin=self.dialect.name)
        if not splittable(pk):
            raise SplitError(f"split_pk {pk.name} of {self.label} is {declared(pk)}; only {kinds} keys can be split "
                             f"(leave split_pk out to {otherwise})", plugin=self.dialect.name)
        return pk

    def min_max(self, sql: str) -> tuple[Any, Any] | None:
        """The key's range as ``sql`` (a ``SELECT MIN(key), MAX(key) ...``) finds it."""
        try:
            row = self.dialect.fetch_one(self.conn, sql)
        except self.dialect.db_error as exc:
            raise SplitError(f"cannot find the key range of {self.label}: {self.dialect.describe(exc)}",
                             plugin=self.dialect.name) from exc
        return None if row is None else (row[0], row[1])

    def splits(self, infos: list[Any], count: int) -> list[Split]:
        """This table as about ``count`` splits (``infos``: all its columns)."""
        raise NotImplementedError


def _unit(split: Split) -> tuple[Any, ...]:
    """What a SQL split reads part of: its table on its shard (a query's split: itself)."""
    relation = split.params.get("relation")
    return (split.params.get("shard"), relation) if relation is not None else (split.id,)


class SqlSplitter:
    """Splits a SQL store's source: the store says how a query split reads and how a table is cut."""

    DIALECT: ClassVar[Dialect]
    CUTTER: ClassVar[type[TableCut]]
    CUT_WITHOUT_KEY: ClassVar[bool] = False
    """Whether a table without ``split_pk`` is cut too (so ``split_factor`` applies to it)."""

    def __init__(self, options: SqlSource, ctx: ReadContext) -> None:
        self.source = options
        self.ctx = ctx

    def split(self, advice: int) -> list[Split]:
        source, dialect = self.source, self.DIALECT
        if isinstance(source, QuerySource):
            return [self.query_split(source, index, shard) for index, shard in enumerate(source.shards)]
        table_count = sum(len(shard.tables) for shard in source.shards)
        per_table = math.ceil(advice / table_count)
        if table_count == 1 and (self.CUT_WITHOUT_KEY or source.selection.split_pk is not None):
            per_table *= source.selection.split_factor  # DataX: small splits so one slow range does not drag the end
        splits: list[Split] = []
        reference: Shape | None = None
        for index, shard in enumerate(source.shards):
            # With a consistent snapshot, the key ranges are those of its instant (the rows read then).
            with planning_session(dialect, source, shard.endpoint, SplitError, self.ctx) as conn:
                for table in shard.tables:
                    infos = table_columns(dialect, source, shard, table, self.ctx, conn)
                    chosen = dialect.choose_columns(infos, source.selection.columns, shard, table)
                    where = f"{dialect.table_label(shard, table)} in {shard.endpoint.mark}"
                    reference = same_shape(reference, chosen, dialect.kind_types, where, dialect.name)
                    cutter = self.CUTTER(dialect, conn, index, shard, table, source.selection, chosen)
                    splits.extend(cutter.splits(infos, per_table))
        self.ctx.log.info("splitter.done", splits=len(splits), tables=table_count)
        return splits

    def outside(self, plan: Sequence[Split]) -> list[Split]:
        """Splits reading the rows of this source that no split of ``plan`` reads (``plan``: a run's, cut
        earlier, whose key ranges were bounded by the key's MIN and MAX then: a row added since below or above
        them, or with a NULL key where the plan had no ``IS NULL`` split, is in none). Per table: the table
        whole when the plan reads none of it, nothing when a split of the plan reads it whole (a query, a table
        without ``split_pk``), else its rows for which no split's condition holds (between two ranges too),
        read with the task's ``where``. ``wormhole verify`` reads them beside the plan's splits."""
        source: SqlSource = self.source
        if not isinstance(source, QuerySource):
            source = dataclasses.replace(source, selection=dataclasses.replace(source.selection, split_pk=None))
        out = []
        for whole in type(self)(source, self.ctx).split(1):  # one split per table: no key, no block range
            mine = [s for s in plan if _unit(s) == _unit(whole)]
            conditions = [s.params.get("predicate") for s in mine]
            if mine and any(c is None for c in conditions):
                continue
            params = dict(whole.params)
            if mine:
                # NULL (a NULL key in a range) is no TRUE: such a row is outside, as the plan's reads skip it.
                rest = f"NOT COALESCE({' OR '.join(f'({c})' for c in conditions)}, FALSE)"
                own = params.get("predicate")
                params["sql"] = f"{params['sql']} {'AND' if own else 'WHERE'} {self.sql_text(rest)}"
                params["predicate"] = f"{own} AND {rest}" if own else rest
            out.append(Split(f"{whole.id}#outside", whole.resource_mark, params))
        return out

    def sql_text(self, text: str) -> str:
        """``text`` (SQL with its values written in) as a split's statement holds it (postgres doubles ``%``)."""
        return text

    def query_split(self, source: QuerySource, index: int, shard: Shard) -> Split:
        """The one split of a query source on ``shard``: the query's columns described on its connection, the
        query read as the store selects them (:meth:`query_sql`)."""
        ep, dialect = shard.endpoint, self.DIALECT
        with planning_session(dialect, source, ep, SplitError, self.ctx) as conn:
            shape = query_columns(dialect, conn, ep, source.query)
        return Split(id=f"{ep.mark}/query", resource_mark=ep.mark,
                     params={"shard": index, "sql": self.query_sql(source.query, shape), "args": (),
                             "kinds": tuple(c.kind for c in shape), "columns": tuple(c.name for c in shape),
                             **self.query_params(source)})

    def query_sql(self, query: str, shape: list[Any]) -> str:
        """The statement a query split runs, its columns as ``describe_query`` gave them (``shape``)."""
        raise NotImplementedError

    def query_params(self, source: QuerySource) -> dict[str, Any]:
        """More params of a query split, for the store's Spark read."""
        return {}
