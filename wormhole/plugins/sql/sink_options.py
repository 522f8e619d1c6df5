"""What the SQL stores' destination params share: the rules across the load keys (``load``, ``staging_table``,
``verify``, ``rollback_sql``), mixed into each store's writer options dataclass (which declares the keys and
their documentation, see :mod:`.source_options`)."""

from __future__ import annotations

from typing import ClassVar

from wormhole.options import Problems, join_path
from wormhole.plugins.sql.source_options import Naming


class SinkParams:
    """The load keys' rules of a SQL store's destination params."""

    __slots__ = ()
    NAMING: ClassVar[Naming]
    FOLDS_CASE: ClassVar[bool] = False
    """Whether the server's table names are alike ignoring case (a staging table must differ the same way)."""
    VERIFY_WHY: ClassVar[str] = "an upsert may rightly change fewer rows than it writes"
    """Why ``verify: count`` needs ``write_mode: insert``, as the store's other write modes go."""

    table: str
    staging_table: str | None
    load: str
    verify: str | None
    write_mode: str
    rollback_sql: tuple[str, ...]

    def check_staging(self, path: str, problems: Problems) -> None:
        """``staging_table`` (a name, only with staging, not the target's) and ``verify``."""
        if self.staging_table is not None:
            self.NAMING.check_identifier(self.staging_table, join_path(path, "staging_table"), problems)
            fold = str.lower if self.FOLDS_CASE else str
            if self.load != "staging":
                problems.add(join_path(path, "staging_table"), "only with load 'staging'")
            elif fold(self.staging_table) == fold(self.table):
                problems.add(join_path(path, "staging_table"), "must differ from table")
        if self.verify == "count" and self.write_mode != "insert":
            problems.add(join_path(path, "verify"), f"count needs write_mode 'insert' ({self.VERIFY_WHY})")

    def check_rollback(self, path: str, problems: Problems) -> None:
        if self.rollback_sql and self.load == "staging":
            problems.add(join_path(path, "rollback_sql"), "not with load 'staging' (rollback drops the staging "
                                                          "table)")
