"""What an incremental task delivered to each destination, as a range of its cursor column (``wormhole verify
--task-id N`` of a task with ``source.incremental``; docs/manual/verify.md).

Each run of an incremental task records its window with its plan (:class:`~wormhole.incremental.Window`: the
upper bound, and the watermark each destination started from) and a commit row per destination it committed.
A destination's windows follow one another without a gap (each starts at the watermark the one before left,
and a window it failed leaves its watermark where it was), so what the task delivered to it is one range:
from the lowest start of a window it committed to the highest upper bound of one. A destination that failed
a window another committed simply has a range of its own.

:class:`RowRange` keeps a batch's rows inside such a range, read as the column's logical type whatever the
store gives (a sqlite or jsonl copy holds a timestamp or a decimal as text), as the window's own filter does:
a NULL or a value that is no value of the type is outside.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal, InvalidOperation
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from wormhole.errors import InvalidTaskConfig
from wormhole.incremental import Window, show
from wormhole.plugins.sql import backquote, quote
from wormhole.recovery.chain import Chain
from wormhole.recovery.checkpoint import CheckpointStore, RowKind
from wormhole.task_spec import SourceSpec


@dataclass(frozen=True, slots=True)
class RowRange:
    """Rows whose ``column`` lies between two bounds (a bound None: no bound on that side)."""

    column: str
    kind: str
    """The column's logical type, as the window has it: int, decimal, date or datetime."""
    lower: Any = None
    lower_inclusive: bool = False
    upper: Any = None
    upper_inclusive: bool = True

    def past(self) -> RowRange:
        """The rows past this range's upper bound: where a row goes once it is updated after its window was
        copied (an update-time cursor), for the next run to take."""
        return RowRange(self.column, self.kind, self.upper, not self.upper_inclusive, None, True)

    def describe(self) -> dict[str, Any]:
        return {"column": self.column, "from": show(self.lower), "from_inclusive": self.lower_inclusive,
                "to": show(self.upper), "to_inclusive": self.upper_inclusive}

    def text(self) -> str:
        low = "the first row" if self.lower is None else \
            f"{show(self.lower)} ({'inclusive' if self.lower_inclusive else 'exclusive'})"
        high = "the last" if self.upper is None else \
            f"{show(self.upper)} ({'inclusive' if self.upper_inclusive else 'exclusive'})"
        return f"{self.column} from {low} to {high}"

    def sql(self, quote: Callable[[str], str]) -> str | None:
        """A condition a SQL source can read by that holds for every row of the range (and may hold for a few
        more): both bounds inclusive, a time's widened by a day (the column's zone or a session's may shift it),
        so the read is narrowed and :meth:`mask` still decides. None: nothing to narrow by."""
        parts = []
        for bound, lower in ((self.lower, True), (self.upper, False)):
            literal = None if bound is None else _sql_literal(bound, self.kind, lower)
            if literal is not None:
                parts.append(f"{quote(self.column)} {'>=' if lower else '<='} {literal}")
        return " AND ".join(parts) or None

    def mask(self, batch: pa.RecordBatch, label: str) -> pa.Array:
        """Which rows of ``batch`` are inside (a boolean array without NULLs)."""
        names = batch.schema.names
        found = [i for i, n in enumerate(names) if n == self.column] or \
            [i for i, n in enumerate(names) if n.casefold() == self.column.casefold()]
        if not found:
            raise InvalidTaskConfig([f"the {label} has no column {self.column} (the incremental cursor), so the rows "
                                     f"of its windows cannot be told apart (it has {', '.join(names)})"])
        column = batch.column(found[0])
        try:
            return self._native(column)
        except (pa.ArrowException, TypeError, ValueError, OverflowError):
            return pa.array(self._python(column.to_pylist()), pa.bool_())

    def _native(self, column: pa.Array) -> pa.Array:
        """The bounds compared by Arrow, where the column has the type the bounds are of."""
        t = column.type
        fits = {"int": pa.types.is_integer(t), "decimal": pa.types.is_decimal(t) or pa.types.is_integer(t),
                "date": pa.types.is_date(t), "datetime": pa.types.is_timestamp(t)}
        if not fits.get(self.kind):
            raise TypeError(f"{t} is read value by value")
        out = pa.array(np.ones(len(column), bool))
        for bound, inclusive, lower in ((self.lower, self.lower_inclusive, True),
                                        (self.upper, self.upper_inclusive, False)):
            if bound is None:
                continue
            if isinstance(bound, Decimal) and not pa.types.is_decimal(t):
                raise TypeError("an exact bound of an integer column is compared value by value")
            scalar = _scalar(bound, t)
            op = (pc.greater_equal if inclusive else pc.greater) if lower else (pc.less_equal if inclusive else pc.less)
            out = pc.and_(out, op(column, scalar))
        return pc.fill_null(out, False)

    def _python(self, values: Sequence[Any]) -> list[bool]:
        out = []
        for v in values:
            value = _value(v, self.kind)
            out.append(value is not None and self._holds(value))
        return out

    def _holds(self, value: Any) -> bool:
        try:
            if self.lower is not None and (value < self.lower or (value == self.lower and not self.lower_inclusive)):
                return False
            return self.upper is None or value < self.upper or (value == self.upper and self.upper_inclusive)
        except TypeError:
            return False


_QUOTES: dict[str, Callable[[str], str]] = {"mysql": backquote, "postgres": quote}
"""The stores whose table reads take a ``where`` a range narrows (sqlite keeps times as text: not it)."""


def narrowing(source: SourceSpec, rows: RowRange | None) -> str | None:
    """The condition added to ``source``'s read for ``rows`` (:meth:`RowRange.sql`: the server leaves out most
    rows outside the range, the mask the rest), when it reads tables of a SQL store that takes one; else None
    (every row is read, and the mask keeps the range's)."""
    plugin_quote = _QUOTES.get(source.plugin)
    # A table source's rows are its selection's (a query's are its own text: not narrowed).
    if rows is None or plugin_quote is None or getattr(source.options, "selection", None) is None:
        return None
    return rows.sql(plugin_quote)


def narrowed(source: SourceSpec, rows: RowRange | None) -> Any:
    """``source``'s options, its read narrowed to ``rows`` where the store can (:func:`narrowing`)."""
    condition = narrowing(source, rows)
    if condition is None:
        return source.options
    selection = source.options.selection
    where = f"({selection.where}) AND {condition}" if selection.where else condition
    return replace(source.options, selection=replace(selection, where=where))


def _sql_literal(bound: Any, kind: str, lower: bool) -> str | None:
    """``bound`` as a SQL literal of ``kind`` (a time moved a day outward: ``lower`` or not); None when it has
    none here (the bound is then left to :meth:`RowRange.mask`)."""
    if isinstance(bound, bool):
        return None
    if kind in ("int", "decimal") and isinstance(bound, int | Decimal):
        if isinstance(bound, Decimal) and not bound.is_finite():
            return None
        return format(bound, "f") if isinstance(bound, Decimal) else str(bound)
    if kind == "datetime" and isinstance(bound, datetime):
        naive = bound.astimezone(UTC).replace(tzinfo=None) if bound.tzinfo is not None else bound
        try:
            moved = naive - timedelta(days=1) if lower else naive + timedelta(days=1)
        except OverflowError:  # within a day of year 1 or 9999: no bound on that side
            return None
        return f"'{moved.isoformat(sep=' ')}'"
    if kind == "date" and isinstance(bound, date) and not isinstance(bound, datetime):
        return f"'{bound.isoformat()}'"
    return None


def _scalar(bound: Any, t: pa.DataType) -> pa.Scalar:
    if isinstance(bound, datetime) and getattr(t, "tz", None):
        # A zoned column holds instants; a naive bound is the source's wall time, which its copies write as UTC.
        bound = bound.replace(tzinfo=UTC) if bound.tzinfo is None else bound
    return pa.scalar(bound).cast(t) if not isinstance(bound, datetime) else pa.scalar(bound, t)


def _value(v: Any, kind: str) -> Any:
    """``v`` (as a store's reader gave it) as a value of ``kind``; None when it is none."""
    if v is None or isinstance(v, bool):
        return None
    try:
        if kind in ("int", "decimal"):
            if isinstance(v, int | Decimal):
                return v
            number = Decimal(str(v).strip())
            return number if number.is_finite() else None
        if kind == "datetime":
            if isinstance(v, str):
                v = datetime.fromisoformat(v.strip())
            if isinstance(v, datetime):
                return v.astimezone(UTC).replace(tzinfo=None) if v.tzinfo is not None else v
            return None
        if kind == "date":
            if isinstance(v, str):
                return date.fromisoformat(v.strip()[:10])
            if isinstance(v, datetime):
                return v.date()
            return v if isinstance(v, date) else None
    except (ValueError, InvalidOperation):
        return None
    return None


@dataclass(frozen=True, slots=True)
class Delivered:
    """What an incremental task delivered to one destination."""

    rows: RowRange | None
    """None: nothing (no run of the task committed a window with rows in it)."""
    runs: tuple[int, ...] = ()
    """The runs that committed the destination, oldest first."""
    reason: str | None = None
    """Why nothing is compared, when ``rows`` is None."""

    def describe(self) -> dict[str, Any]:
        return {**(self.rows.describe() if self.rows is not None else {}), "runs": list(self.runs)}


def delivered(store: CheckpointStore, run_ids: Sequence[int], destination: str, *, label: str,
              scope: str | None = None) -> Delivered:
    """The range of the cursor column the runs ``run_ids`` (a task's, oldest first) delivered to ``destination``
    (as its commit rows name it: a database task's pair id), by the windows of the runs that committed it
    (``scope``: a database task's table, whose window it is). ``label``: the destination as the user knows it."""
    windows: list[Window] = []
    runs: list[int] = []
    unrecorded = 0
    for run in run_ids:
        rows = store.checkpoint(run)
        if not any(r.kind == RowKind.COMMITTED and r.destination == destination for r in rows):
            continue
        window = Chain.read(store, run).plan(scope).window
        if window is None:
            unrecorded += 1
            continue
        runs.append(run)
        windows.append(window)
    if not windows:
        why = (f"no run of the task committed {label}" if not unrecorded else
               f"the windows of the runs that committed {label} are no longer recorded (task clean removes them)")
        return Delivered(None, reason=f"nothing delivered to compare: {why}")
    filled = [w for w in windows if w.upper is not None]
    if not filled:
        return Delivered(None, tuple(runs), f"nothing delivered to compare: the source held no row when the runs "
                                            f"that committed {label} were planned ({_runs(runs)})")
    first = windows[0]
    starts = [w.bound_of(destination) for w in windows]
    lower = None if any(s is None for s in starts) else min(starts)
    last = max(filled, key=lambda w: w.upper)
    return Delivered(RowRange(first.column, first.kind, lower, first.inclusive_lower, last.upper,
                              last.upper_inclusive), tuple(runs))


def _runs(runs: Sequence[int]) -> str:
    return ("run " if len(runs) == 1 else "runs ") + ", ".join(str(r) for r in runs)

