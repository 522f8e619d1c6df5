"""What the SQL stores do alike with what their catalogs say: the columns a source reads, chosen by name,
and the rule that every table of a source reads as the first one does."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from wormhole.errors import SplitError


@dataclass(frozen=True, slots=True)
class CatalogColumn:
    """A column as a store's catalog describes it (each store's own class holds more)."""

    name: str
    kind: str
    """How the reader selects and parses the column: the store's kinds map to logical types."""


ColumnT = TypeVar("ColumnT", bound=CatalogColumn)


def choose_columns(infos: list[ColumnT], wanted: Sequence[str] | None, where: str, plugin: str) -> list[ColumnT]:
    """The columns ``wanted`` names, in its order (exact names first, then ignoring case); SplitError
    saying ``<where> has no column ...`` when one is not there."""
    if wanted is None:
        return infos
    exact = {c.name: c for c in infos}
    folded = {c.name.lower(): c for c in infos}
    unknown = [w for w in wanted if w not in exact and w.lower() not in folded]
    if unknown:
        raise SplitError(f"{where} has no column {', '.join(unknown)}", plugin=plugin)
    return [exact.get(w) or folded[w.lower()] for w in wanted]


def query_columns(dialect: Any, conn: Any, endpoint: Any, query: str) -> list[Any]:
    """The columns ``query`` returns (the dialect's :meth:`~.dialect.Dialect.describe_query`); SplitError with the
    server's reason when it fails."""
    try:
        return dialect.describe_query(conn, query)  # type: ignore[no-any-return]
    except dialect.db_error as exc:
        raise SplitError(f"the query fails on {endpoint.mark}: {dialect.describe(exc)}", plugin=dialect.name) from exc


def find_column(infos: Sequence[ColumnT], name: str) -> ColumnT | None:
    """The column called ``name``: exactly, else ignoring case."""
    return {c.name: c for c in infos}.get(name) or {c.name.lower(): c for c in infos}.get(name.lower())


Shape = list[tuple[str, str]]


def same_shape(reference: Shape | None, chosen: Sequence[CatalogColumn], kind_types: Mapping[str, str], where: str,
               plugin: str) -> Shape:
    """Every table of a source must read as the first one does (names and logical types)."""
    shape = [(c.name.lower(), kind_types[c.kind]) for c in chosen]
    if reference is not None and shape != reference:
        raise SplitError(f"table {where} has columns {_show(shape)}, unlike the first table's {_show(reference)}",
                         plugin=plugin)
    return shape if reference is None else reference


def _show(shape: Shape) -> str:
    return ", ".join(f"{n} {t}" for n, t in shape)
