"""What the SQL stores' destination params share: the checks of the names and credentials, the rules across
the load keys (``load``, ``staging_table``, ``verify``, ``rollback_sql``) and the single-writer key, mixed into
each store's writer options dataclass (which declares the keys and their documentation, see
:mod:`.source_options`)."""

from __future__ import annotations

from typing import ClassVar

from wormhole.options import Problems, join_path
from wormhole.plugins.sql import check_names
from wormhole.plugins.sql.source_options import Naming, check_credentials
from wormhole.plugins.writing import TargetRows


class SinkParams:
    """The load keys' rules of a SQL store's destination params."""

    __slots__ = ()
    NAMING: ClassVar[Naming]
    FOLDS_CASE: ClassVar[bool] = False
    """Whether the server's table names are alike ignoring case (a staging table must differ the same way, and the
    single-writer key is of the lower-case names)."""
    VERIFY_WHY: ClassVar[str] = "an upsert may rightly change fewer rows than it writes"
    """Why ``verify: count`` needs ``write_mode: insert``, as the store's other write modes go."""
    TARGET_KEYS: ClassVar[tuple[str, ...]] = ("database", "table")
    """The keys naming the target table, outermost first: each is checked as a name, and together they are the
    table's single-writer key."""
    NAME_LISTS: ClassVar[tuple[str, ...]] = ("columns",)
    """The keys holding a list of column names."""

    host: str
    port: int
    password: str | None
    password_env: str | None
    table: str
    staging_table: str | None
    load: str
    verify: str | None
    write_mode: str
    columns: tuple[str, ...] | None
    rollback_sql: tuple[str, ...]

    def check(self, path: str, problems: Problems) -> None:
        check_credentials(self.password, self.password_env, path, problems)
        self.check_servers(path, problems)
        for key in self.NAME_LISTS:
            check_names(getattr(self, key), join_path(path, key), problems, self.NAMING.check_identifier)
        for key in self.TARGET_KEYS:
            self.NAMING.check_identifier(getattr(self, key), join_path(path, key), problems)
        self.check_staging(path, problems)
        self.check_keys(path, problems)
        self.check_rollback(path, problems)

    def check_servers(self, path: str, problems: Problems) -> None:
        """The server keys beside host and port (none unless the store has some)."""

    def check_keys(self, path: str, problems: Problems) -> None:
        """The store's own rules across its keys (none unless it has some)."""

    def single_writer_key(self) -> str | None:
        """Two destinations truncating or swapping the same table would undo each other's load."""
        if self.load == "append":
            return None
        target = ".".join(getattr(self, key) for key in self.TARGET_KEYS)
        target = target.lower() if self.FOLDS_CASE else target
        return f"{self.NAMING.name} table {self.host.lower()}:{self.port}/{target}"

    def target_rows(self) -> TargetRows:
        """A truncate or staging load leaves only the run's rows; an insert adds to the table's, another write
        mode may change them (``settings.verify``)."""
        if self.load in ("truncate", "staging"):
            return TargetRows("replaced", self.columns)
        return TargetRows("added" if self.write_mode == "insert" else "merged", self.columns)

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
