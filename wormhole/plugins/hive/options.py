"""The hive store's options (``source.params`` / ``destinations[i].params``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from wormhole.options import Problems, join_path, opt, show_value

TABLE_PATTERN = r"[A-Za-z_][A-Za-z0-9_]*\.[A-Za-z_][A-Za-z0-9_]*"


@dataclass(frozen=True, slots=True, kw_only=True)
class HiveReaderOptions:
    table: str = opt(pattern=TABLE_PATTERN)
    """``database.table`` in the session's catalog."""
    columns: tuple[str, ...] | None = opt(None, min_items=1)
    """Columns to read, in this order; default every column of the table."""
    where: str | None = None
    """A Spark SQL condition (partition columns prune partitions)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class HiveWriterOptions:
    table: str = opt(pattern=TABLE_PATTERN)
    """``database.table`` to load; columns are matched to the source's by name."""
    partition: dict[str, Any] | None = None
    """Static partition spec, e.g. ``{"dt": "2026-11-21"}``: every partition column of the table,
    each with a value; the rows land in (and ``overwrite`` replaces) only that partition."""
    mode: Literal["append", "overwrite"] = "append"
    """``append`` adds the rows; ``overwrite`` replaces the table (or only the static partition) at commit."""
    create: bool = False
    """Create a missing table (Parquet, columns from the source, partitioned by the ``partition``
    keys as strings); otherwise a missing table fails the destination at prepare."""

    def check(self, path: str, problems: Problems) -> None:
        for key, value in (self.partition or {}).items():
            if not key.isidentifier():
                problems.add(join_path(join_path(path, "partition"), key), "is not a column name")
            if not isinstance(value, (str, int)) or isinstance(value, bool):
                problems.add(join_path(join_path(path, "partition"), key),
                             f"a static partition value is a string or an integer, got {show_value(value)}")
