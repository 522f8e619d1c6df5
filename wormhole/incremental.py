"""Incremental reads: each run moves only the rows past a watermark, kept per destination.

``source.incremental`` names a column and a mode. ``append``: a strictly increasing key, rows with
``column > last`` (a timestamp or date key: ``column >= last``, see below). ``lastmodified``: an update
timestamp, rows with ``column >= last - lag_s`` (the destination deduplicates by its key, an upsert).
The upper bound is fixed when the run is planned (:func:`plan_window`): ``column <= MAX(column)`` for a
number, ``column < now - lag_s`` for a timestamp (the source's clock, to the whole second, so a row
written in the same second as the plan waits for the next run), ``column < today`` for a date. Rows that
arrive while a run reads are taken by the next run, never half.

Every destination has its own watermark (``wormhole_watermark``: state key, destination, value, the run
that set it). A run reads once from the lowest of them and each destination's own filter keeps only the
rows past its own, so a destination that missed a window catches up while the others get no row twice.
Both bounds are transforms (:func:`windowed`): a filter at the head of the task's transforms, which a
mysql or sqlite source evaluates in its query (push-down), and one at the head of a lagging
destination's own; so the window means the same in both engines and in every placement.

A destination's watermark advances to the run's upper bound in the task-database transaction that
records its commit row (:meth:`~wormhole.recovery.checkpoint.Checkpointer.committed`). A crash between a
destination's commit and that row leaves the destination's own record (its markers) saying it committed;
the run that resumes it commits it again, which writes the row and the watermark then. The window and
the watermarks it started from are recorded with the run's plan, so a resumed run reads the same window.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from decimal import Decimal
from typing import Any, Literal

from wormhole.errors import ConfigError, InvalidTaskConfig
from wormhole.options import Problems, join_path, opt
from wormhole.plugins.base import SourceBounds

Mode = Literal["append", "lastmodified"]
KINDS = ("int", "decimal", "date", "datetime")
"""Logical types an incremental column may have."""

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True, slots=True, kw_only=True)
class IncrementalSpec:
    """``source.incremental``: what each run of the task reads past its watermarks."""

    column: str = opt(nonempty=True)
    """The column the watermark follows: an increasing key (append) or an update timestamp (lastmodified)."""
    mode: Mode = "append"
    """``append``: rows past the last value; ``lastmodified``: rows from the last value less ``lag_s``."""
    initial: Any = None
    """The watermark of a destination that has none yet: a number, or an ISO date or timestamp text
    (default: every row)."""
    lag_s: float = opt(0.0, min=0.0, max=30 * 86400.0)
    """Timestamps only: how far a row's timestamp may trail its commit (long transactions, writers' clocks).
    A run reads rows older than now less ``lag_s``; lastmodified reads again from the last value less it."""
    state_key: str | None = opt(None, nonempty=True)
    """Under which name the watermarks are kept (default: the task's name, else ``task-<id>``)."""
    without_column: Literal["fail", "skip"] = "fail"
    """A database task: what becomes of a selected table that has no ``column``. ``fail``: the task is refused
    (exit 204) naming the tables; ``skip``: they are left out of the task (the plan and the result list them),
    since a table read whole on every run would be written again into every destination that appends."""

    def check(self, path: str, problems: Problems) -> None:
        if not _NAME.fullmatch(self.column):
            problems.add(join_path(path, "column"), "must be a plain column name (letters, digits, _)")
        if self.initial is not None and (isinstance(self.initial, bool)
                                         or not isinstance(self.initial, int | float | str)):
            problems.add(join_path(path, "initial"), "must be a number or an ISO date or timestamp text")
        if isinstance(self.initial, float):
            problems.add(join_path(path, "initial"), "must be an integer, or a decimal written as text")


@dataclass(frozen=True, slots=True)
class Window:
    """One run's window: its upper bound and the watermark each destination starts from."""

    state_key: str
    column: str
    mode: Mode
    kind: str
    lag_s: float
    upper: Any
    """None: the source had no value, there is nothing to read."""
    upper_inclusive: bool
    lowers: Mapping[str, Any]
    """Destination -> its watermark when the run was planned (None: it reads from the start)."""

    def bound_of(self, destination: str) -> Any:
        """The rows ``destination`` receives start here (None: from the first row)."""
        last = self.lowers.get(destination)
        if last is None or self.mode == "append" or not self.lag_s:
            return last
        return last - timedelta(seconds=self.lag_s)

    @property
    def inclusive_lower(self) -> bool:
        # A timestamp or date upper bound is exclusive, so the next run starts at it, inclusive.
        return self.mode == "lastmodified" or self.kind in ("date", "datetime")

    def lowest(self) -> Any:
        """Where the shared read starts: the lowest destination bound (None when one reads from the start)."""
        bounds = [self.bound_of(d) for d in self.lowers]
        return None if any(b is None for b in bounds) else min(bounds)

    def advanced(self, destination: str) -> Any:
        """The watermark ``destination`` has once this run commits it (never lower than it was)."""
        last = self.lowers.get(destination)
        if self.upper is None:
            return last
        return self.upper if last is None else max(last, self.upper)

    def to_json(self) -> str:
        return json.dumps({"state_key": self.state_key, "column": self.column, "mode": self.mode, "kind": self.kind,
                           "lag_s": self.lag_s, "upper": encode(self.upper), "upper_inclusive": self.upper_inclusive,
                           "lowers": {d: encode(v) for d, v in self.lowers.items()}}, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Window:
        raw = json.loads(text)
        return cls(raw["state_key"], raw["column"], raw["mode"], raw["kind"], float(raw["lag_s"]),
                   decode(raw["upper"]), bool(raw["upper_inclusive"]),
                   {d: decode(v) for d, v in raw["lowers"].items()})

    def describe(self) -> dict[str, Any]:
        """The window as the plan and the result show it (values as text)."""
        return {"state_key": self.state_key, "column": self.column, "mode": self.mode, "lag_s": self.lag_s,
                "from": show(self.lowest()), "from_inclusive": self.inclusive_lower,
                "to": show(self.upper), "to_inclusive": self.upper_inclusive,
                "destinations": {d: {"from": show(self.bound_of(d)), "watermark": show(v)}
                                 for d, v in self.lowers.items()}}


# -- values as the task database keeps them ------------------------------------------------------


def encode(value: Any) -> Any:
    """A watermark value as JSON, its type kept (``{"datetime": "..."}``); None stays None."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise TypeError("a watermark cannot be a bool")
    if isinstance(value, int):
        return {"int": str(value)}
    if isinstance(value, Decimal):
        return {"decimal": format(value, "f")}
    if isinstance(value, datetime):
        return {"datetime": value.isoformat(sep=" ")}
    if isinstance(value, date):
        return {"date": value.isoformat()}
    raise TypeError(f"a watermark cannot be a {type(value).__name__}")


def decode(raw: Any) -> Any:
    if raw is None:
        return None
    ((kind, text),) = raw.items()
    parse: dict[str, Callable[[str], Any]] = {"int": int, "decimal": Decimal, "datetime": datetime.fromisoformat,
                                              "date": date.fromisoformat}
    return parse[kind](text)


def show(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, datetime):
        return value.isoformat(sep=" ")
    return format(value, "f") if isinstance(value, Decimal) else str(value)


# -- planning ---------------------------------------------------------------------------------------


def state_key(given: str | None, task_name: str, task_id: int) -> str:
    """The name the watermarks are kept under: ``state_key``, else the task's name, else ``task-<id>``."""
    return given or task_name or f"task-{task_id}"


def initial_value(spec: IncrementalSpec, kind: str) -> Any:
    """``initial`` as a value of the column's type; ConfigError naming it when it is not one."""
    raw = spec.initial
    if raw is None:
        return None
    try:
        if kind == "int":
            return int(raw) if isinstance(raw, int) else int(str(raw).strip())
        if kind == "decimal":
            return Decimal(str(raw).strip())
        if kind == "datetime" and isinstance(raw, str):
            return datetime.fromisoformat(raw.strip())
        if kind == "date" and isinstance(raw, str):
            return date.fromisoformat(raw.strip())
    except (ValueError, ArithmeticError):
        pass
    raise InvalidTaskConfig([f"source.incremental.initial: {raw!r} is not a value of the {kind} column {spec.column}"])


def fresh_window(spec: Any, ctx: Any, task_id: int, kept: Callable[[str], Mapping[str, tuple[str | None, int]]]
                 ) -> Window:
    """A new run's window: ``spec`` (a TaskSpec with ``source.incremental``) asks its source for the bounds,
    ``kept(state_key)`` gives the watermarks the task database holds (JSON text per destination)."""
    from wormhole.plugins import registry

    inc = spec.source.incremental
    role = registry.get(spec.source.plugin).source
    assert inc is not None and role is not None and role.bounds is not None  # validation requires them
    key = state_key(inc.state_key, spec.name, task_id)
    values = {d: decode(json.loads(v)) for d, (v, _run) in kept(key).items() if v is not None}
    bounds = role.bounds(spec.source.options, ctx, inc.column)
    return plan_window(inc, key, [d.id for d in spec.destinations], bounds, values)


def outcome(window: Window, committed: Mapping[str, bool]) -> dict[str, Any]:
    """The result's ``incremental``: the window, and each destination's watermark now (advanced when it
    committed, else the one it started from)."""
    out = window.describe()
    for dest, shown in out["destinations"].items():
        shown["now"] = show(window.advanced(dest) if committed.get(dest) else window.lowers.get(dest))
    return out


def plan_window(spec: IncrementalSpec, key: str, destinations: list[str], bounds: SourceBounds,
                kept: Mapping[str, Any]) -> Window:
    """The run's window from what the source says now and the watermarks kept for ``destinations``."""
    kind = bounds.kind
    # What the source says about the column makes the task invalid (exit 204), not the read side failed.
    if kind not in KINDS:
        raise InvalidTaskConfig([f"source.incremental.column: {spec.column} is {kind}; an incremental column must "
                                 f"be an integer, a decimal, a date or a timestamp"])
    if spec.mode == "lastmodified" and kind != "datetime":
        raise InvalidTaskConfig([f"source.incremental.mode: lastmodified needs a timestamp column; {spec.column} "
                                 f"is {kind}"])
    if spec.lag_s and kind != "datetime":
        raise InvalidTaskConfig([f"source.incremental.lag_s: only a timestamp column has a lag; {spec.column} "
                                 f"is {kind}"])
    if kind == "datetime":
        upper: Any = bounds.now - timedelta(seconds=spec.lag_s)
        inclusive = False
    elif kind == "date":
        upper, inclusive = bounds.now.date(), False
    else:
        upper, inclusive = bounds.maximum, True
    start = initial_value(spec, kind)
    lowers = {d: kept.get(d, start) for d in destinations}
    return Window(key, spec.column, spec.mode, kind, spec.lag_s, upper, inclusive, lowers)


# -- the window as transforms -----------------------------------------------------------------------


def literal(value: Any) -> str:
    """``value`` in the transforms' expression language."""
    if isinstance(value, datetime):
        return f"TIMESTAMP '{value.isoformat(sep=' ')}'"
    if isinstance(value, date):
        return f"DATE '{value.isoformat()}'"
    text = format(value, "f") if isinstance(value, Decimal) else str(int(value))
    return f"({text})" if text.startswith("-") else text


def conditions(window: Window, lower: Any, upper: bool) -> str:
    """The filter text: rows from ``lower`` (None: no lower bound), up to the run's upper bound if ``upper``."""
    column = f"`{window.column}`"
    parts = []
    if lower is not None:
        parts.append(f"{column} {'>=' if window.inclusive_lower else '>'} {literal(lower)}")
    if upper:
        if window.upper is None:
            return "FALSE"
        parts.append(f"{column} {'<=' if window.upper_inclusive else '<'} {literal(window.upper)}")
    return " AND ".join(parts) or "TRUE"


def windowed(spec: Any, window: Window) -> Any:
    """``spec`` (a TaskSpec) with the window as transforms: the shared read's bounds at the head of the
    task's transforms, and each destination that starts above the lowest bound its own filter."""
    from wormhole.transform.operators import parse_transforms

    problems = Problems()
    lowest = window.lowest()
    head = parse_transforms([{"filter": conditions(window, lowest, upper=True)}], "source.incremental",
                            "incremental", problems)
    destinations = []
    for dest in spec.destinations:
        own = window.bound_of(dest.id)
        if own is not None and own != lowest:
            mine = parse_transforms([{"filter": conditions(window, own, upper=False)}],
                                    f"source.incremental (destination {dest.id})", f"incremental:{dest.id}", problems)
            dest = dataclasses.replace(dest, transforms=mine + dest.transforms)
        destinations.append(dest)
    if problems:  # the texts are ours: a problem here is a bug
        raise ConfigError(f"source.incremental: {'; '.join(problems.items)}")
    return dataclasses.replace(spec, transforms=head + spec.transforms, destinations=tuple(destinations))
