"""What the chain of runs a run continues recorded in the task database's checkpoint rows, each row read
by its kind (:class:`~wormhole.recovery.checkpoint.RowKind`): the plan and window of the newest run that
planned, the destinations each run committed, the transform placement each split was read under.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from wormhole.incremental import Window
from wormhole.recovery.checkpoint import CheckpointRow, CheckpointStore, RowKind, recorded_placements


@dataclass(frozen=True, slots=True)
class ChainPlan:
    """The plan of the newest run of the chain that recorded one (a run killed before it planned recorded
    none, and no destination holds anything of it): every run of a chain reads the same splits."""

    run: int | None = None
    """The run that recorded it (None: no run of the chain planned)."""
    rows: tuple[CheckpointRow, ...] = ()
    """Its plan rows, in the order saved."""
    window: Window | None = None
    """An incremental run's window, recorded with the plan."""
    kept: int = 0
    """That run's durable and commit rows (what its checkpoint says the destinations hold)."""


@dataclass(frozen=True, slots=True)
class Chain:
    """The checkpoint rows of each run of a chain, newest run first (the one resumed, then the run it
    resumed, back to the first)."""

    runs: tuple[tuple[int, tuple[CheckpointRow, ...]], ...]

    @classmethod
    def read(cls, checkpoints: CheckpointStore, resume_from: int) -> Chain:
        runs: list[tuple[int, tuple[CheckpointRow, ...]]] = []
        run: int | None = resume_from
        while run is not None:
            runs.append((run, tuple(checkpoints.checkpoint(run))))
            run = checkpoints.resumed_from(run)
        return cls(tuple(runs))

    @property
    def root(self) -> int:
        """The first run of the chain."""
        return self.runs[-1][0]

    def plan(self, scope: str | None = None) -> ChainPlan:
        """``scope``: one table of a database task (its split ids begin :func:`split_prefix`, its window row's split is
        ``scope``): the newest run that planned that table, which need not be the newest that planned at all
        (a resumed run killed before it reached the table planned others only)."""
        for run, rows in self.runs:
            plan = tuple(r for r in rows if r.kind == RowKind.PLAN and r.payload is not None and _ours(r, scope))
            if plan:
                windows = [r.payload for r in rows if r.kind == RowKind.WINDOW and r.payload is not None
                           and (r.split_id or "") == (scope or "")]
                kept = sum(r.kind in (RowKind.DURABLE, RowKind.COMMITTED) and _ours(r, scope) for r in rows)
                return ChainPlan(run, plan, Window.from_json(windows[0]) if windows else None, kept)
        return ChainPlan()

    def committed(self) -> Mapping[str, tuple[int, int]]:
        """Destination -> (its rows, the run that committed it): the newest run's commit row of it."""
        out: dict[str, tuple[int, int]] = {}
        for run, rows in self.runs:
            for row in rows:
                if row.kind == RowKind.COMMITTED and row.destination is not None:
                    out.setdefault(row.destination, (row.rows or 0, run))
        return out

    def digests(self) -> dict[tuple[str, str], str]:
        """(destination, split) -> the payload of the newest durable row of it, where one was recorded with a
        payload (``settings.verify``'s digest of what the destination accepted of the split, as versions before the
        split digest rows recorded it: :meth:`~wormhole.recovery.checkpoint.CheckpointStore.split_digests`)."""
        out: dict[tuple[str, str], str] = {}
        for _, rows in self.runs:
            for row in rows:
                if row.kind == RowKind.DURABLE and row.payload and row.destination and row.split_id:
                    out.setdefault((row.destination, row.split_id), row.payload)
        return out

    def placements(self) -> dict[str, dict[str, Any]]:
        """Split -> the transform placement it was read under: the newest run's record of it."""
        out: dict[str, dict[str, Any]] = {}
        for _, rows in self.runs:
            for split_id, recorded in recorded_placements(rows).items():
                out.setdefault(split_id, recorded)
        return out


def _ours(row: CheckpointRow, scope: str | None) -> bool:
    """Whether a plan, durable or commit row is of ``scope`` (None: a run with one scope, every row is)."""
    if scope is None:
        return True
    if row.kind == RowKind.COMMITTED:
        return (row.destination or "").endswith(f"/{scope}")  # a pair id, dest/schema.table
    return (row.split_id or "").startswith(split_prefix(scope))


def split_prefix(scope: str) -> str:
    """What a database task's table's split ids begin with: its scope, ``%`` and ``#`` escaped, then ``#``, so no
    table's prefix begins another's (tables ``a`` and ``a#b`` of one schema: ``s.a#`` and ``s.a%23b#``)."""
    return scope.replace("%", "%25").replace("#", "%23") + "#"
