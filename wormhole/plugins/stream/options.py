"""The stream store's options: the generator's (``source.params``) and the null sink's (``destinations[i].params``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from wormhole.options import Problems, join_path, opt


@dataclass(frozen=True, slots=True, kw_only=True)
class ColumnOption:
    name: str = opt(nonempty=True)
    """Column name."""
    type: Literal["int", "float", "decimal", "string", "bytes", "bool", "date", "datetime", "json"] = "string"
    """Logical type of the generated values."""


DEFAULT_COLUMNS = (
    ColumnOption(name="id", type="int"),
    ColumnOption(name="name", type="string"),
    ColumnOption(name="amount", type="float"),
    ColumnOption(name="day", type="date"),
)


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamReaderOptions:
    rows: int = opt(min=0)
    """How many rows to generate."""
    splits: int = opt(1, min=1, max=100_000)
    """Ranges of ``id`` the rows are cut into (each a split readers take in turn)."""
    seed: int = 0
    """Seed of the generated values: the same seed gives the same rows."""
    columns: tuple[ColumnOption, ...] = DEFAULT_COLUMNS
    """``id`` (type int) is the row number; every other column cycles through generated values."""
    dirty_every: int | None = opt(None, min=1)
    """Every Nth row (rows N-1, 2N-1, ...) carries a string no store can encode."""

    def check(self, path: str, problems: Problems) -> None:
        names = [c.name for c in self.columns]
        if len(set(names)) != len(names):
            problems.add(join_path(path, "columns"), "column names must be unique")
        for i, c in enumerate(self.columns):
            if c.name == "id" and c.type != "int":
                problems.add(join_path(join_path(path, "columns"), i), "column 'id' must have type int")
        if self.dirty_every is not None and not any(c.type == "string" for c in self.columns):
            problems.add(join_path(path, "dirty_every"), "needs a string column to make dirty")




@dataclass(frozen=True, slots=True, kw_only=True)
class NullWriterOptions:
    fail_after: int | None = opt(None, min=0)
    """Raise once the destination has taken this many rows (a broken destination, for tests)."""
    delay_ms: float = opt(0.0, min=0.0, max=3_600_000.0)
    """Sleep this long per batch (a slow destination, for tests of back-pressure)."""
    print: bool = False
    """Write every row to standard output as one line, fields joined by ``delimiter`` (DataX's streamwriter
    ``print``); logs and the live view stay on standard error. Rows print as they are written, before commit."""
    delimiter: str = opt("\t", pattern=r"[^\r\n\\]+")
    r"""Field separator of printed rows; a tab, newline, carriage return or backslash inside a value is
    printed as ``\t``, ``\n``, ``\r``, ``\\``, so a row is always one line."""
    null: str = "null"
    r"""How a NULL prints (DataX prints ``null``; ``\N`` tells it from the text 'null')."""
