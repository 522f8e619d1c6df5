"""A copy verified in the run that made it (``settings.verify: count | checksum``; issue 39, items 1 and 2).

For each destination, what its store accepted in this run is summed as it is written
(:mod:`wormhole.verify.sent`: no read of the source); after the destination's commit its target is read back
through its own store's reader (:func:`wormhole.verify.task.readback`) and its digest, or its row count, is
compared with what it should hold:

- the rows sent in this run, plus the rows of the splits it held from the runs this one resumes (their
  digests recorded with their durable checkpoint rows);
- plus, where the run's rows are *added* to what the target held (an append; :class:`TargetRows`), the
  target as it was before the run, read once after prepare. A target whose rows a run may change (a replace
  or upsert into a table that held rows) cannot be compared so and is said to be not verified, as is a
  resumed append (what the target held before the first run is not recorded), a store that cannot be read
  back, or a destination some batch of which could not be hashed. Never a pass.

A mismatch leaves the destination's rows committed (it says so) and fails its verification alone: the
task's status is partial (exit 202). Where the target holds only the task's rows and the rows are the
source's (no transforms, no incremental window), the source as it is now is compared with the destination
to name the first differing keys (:func:`wormhole.verify.diff.compare`); when the source no longer gives the
digest that was sent, the result says the source changed since the run rather than blaming the destination.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from wormhole.errors import InvalidTaskConfig
from wormhole.log import Logger
from wormhole.plugins.base import SinkRole, Split, TargetRows, WriteContext
from wormhole.plugins.schema import Schema
from wormhole.task_spec import DestinationSpec, TaskSpec
from wormhole.verify.checksum import Digest, JsonNull
from wormhole.verify.diff import Side, compare, parse_side
from wormhole.verify.sent import SentDigests
from wormhole.verify.sides import side_digest

Mode = Literal["count", "checksum"]
State = Literal["verified", "mismatch", "failed", "not_verified"]
"""``failed``: the target could not be read back after its commit (a verification error, never a pass)."""

SAMPLES = 5
"""Differing keys named in a mismatch's result."""


@dataclass(frozen=True, slots=True)
class Verification:
    """One destination's verification, as its result shows it (``destinations.<id>.verify``)."""

    mode: str
    state: State
    rows_expected: int | None = None
    rows_found: int | None = None
    digest_expected: str | None = None
    digest_found: str | None = None
    splits: int = 0
    """Splits whose digests were summed (sent in this run, or held from the runs it resumes)."""
    reason: str | None = None
    """Why it is not verified, or what the mismatch is."""
    differences: Mapping[str, int] | None = None
    samples: tuple[Mapping[str, Any], ...] = ()
    differing_splits: list[str] | None = None
    """A located mismatch: the run's splits holding differing keys, and
    :data:`~wormhole.verify.by_plan.OUTSIDE` when rows of the source that none of them reads differ (rows it
    gained beyond the key range the run's plan was cut from)."""

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["samples"] = list(self.samples)  # asdict made them dicts already; a list for JSON
        return {k: v for k, v in out.items() if v is not None and v != []}


class DestinationCheck:
    """What verifying one destination of the run needs, made when it is prepared."""

    def __init__(self, mode: Mode, spec: TaskSpec, dest: DestinationSpec, sink: SinkRole[Any], schema: Schema,
                 *, batch_rows: int, readers: int, log: Logger, ctx: WriteContext | None = None) -> None:
        self.mode, self.spec, self.dest, self.log = mode, spec, dest, log
        self.sink, self.ctx = sink, ctx
        self.batch_rows, self.readers = batch_rows, readers
        self.schema = schema
        self.side: Side | None = None
        self.sent: SentDigests | None = None
        self.before: Digest | None = None
        self.before_note: str | None = None
        """Why the target as the run found it was taken as empty, if it was."""
        self.unverified: str | None = None
        """Why this destination cannot be verified (known before its rows are written), else None."""
        self.target: TargetRows | None = sink.target_rows(dest.options) if sink.target_rows is not None else None
        if self.target is None:
            self.unverified = f"the {dest.plugin} store does not say how a run's rows meet its target's"
            return
        try:
            self.side = parse_side(readback_spec(dest), f"destination {dest.id} read back")
        except InvalidTaskConfig as exc:
            self.unverified = f"it cannot be read back: {'; '.join(exc.problems)}"
            return
        names = self.target.columns or schema.names
        if len(names) != len(schema.columns):
            self.unverified = f"its columns ({', '.join(names)}) are not the rows' ({', '.join(schema.names)})"
            return
        self.columns = tuple(names)
        self.logical = {n: c.type for n, c in zip(names, schema.columns, strict=True)}
        self.json_null: JsonNull = "null" if jsonl(self.side) else "value"
        self.sent = SentDigests(schema, self.json_null, count_only=mode == "count")

    # -- before the rows are written ------------------------------------------------------------

    def read_before(self, resuming: bool, held: Mapping[str, int], stop: threading.Event) -> None:
        """Read the target as the run found it, where its rows stay beside the run's (an append)."""
        if self.unverified is not None or self.target is None or self.target.meet == "replaced":
            return
        if resuming and held:
            self.unverified = ("a resumed run of a load that adds to the target's rows: what the target held "
                               "before the first run is not recorded")
            return
        try:
            self.before = self._digest(stop)
        except Exception as exc:
            # Most often the target does not exist yet (a table its writers create). Taken as empty, which can
            # never pass a copy that is wrong: rows it did hold would be found after the commit, unexpected.
            self.before, self.before_note = Digest.empty(), f"the target could not be read before the run ({exc})"
            self.log.info("verify.target_before_unread", error=str(exc))
            return
        if self.target.meet == "merged" and self.before.rows:
            self.unverified = (f"the target held {self.before.rows} row(s) before the run and its write mode may "
                               f"change them")
        self.log.info("verify.target_before", rows=self.before.rows)

    # -- after the commit ------------------------------------------------------------------------

    def check(self, held: Mapping[str, int], recorded: Mapping[str, Digest], stop: threading.Event,
              splits: Sequence[Split] | None = None) -> Verification:
        """Read the committed target back and compare it with what it should hold (``splits``: the run's, by
        which a mismatch is located to its splits)."""
        if self.unverified is not None or self.sent is None or self.side is None:
            return Verification(self.mode, "not_verified", reason=self.unverified)
        if self.sent.failed is not None:
            return Verification(self.mode, "not_verified", reason=self.sent.failed)
        missing = [s for s in held if s not in recorded]
        if missing:
            return Verification(self.mode, "not_verified", reason=(
                f"{len(missing)} split(s) held from the runs this one resumes have no recorded digest "
                f"(the first: {missing[0]})"))
        expected = self.sent.total()
        for split_id in held:
            expected += recorded[split_id]
        if self.before is not None:
            expected += self.before
        counted = self.sent.splits() + len(held)
        try:
            found = self._digest(stop)
        except Exception as exc:
            return Verification(self.mode, "failed", rows_expected=expected.rows, splits=counted,
                                reason=f"the destination could not be read back: {exc}")
        if self.mode == "count":
            same = found.rows == expected.rows
            result = Verification(self.mode, "verified" if same else "mismatch", rows_expected=expected.rows,
                                  rows_found=found.rows, splits=counted,
                                  reason=None if same else f"it holds {found.rows} rows, {expected.rows} expected")
        else:
            same = found == expected
            result = Verification(self.mode, "verified" if same else "mismatch", rows_expected=expected.rows,
                                  rows_found=found.rows, digest_expected=str(expected), digest_found=str(found),
                                  splits=counted, reason=None if same else "its checksum differs from what was sent")
        if not same:
            if self.before_note is not None:
                result = dataclasses.replace(result, reason=f"{result.reason}; {self.before_note}: taken as empty")
            result = self._located(result, stop, splits)
        return result

    def _digest(self, stop: threading.Event) -> Digest:
        """The target's digest, or its count (``count``: the store counts, where it can)."""
        assert self.side is not None
        if self.mode == "count" and self.sink.count_rows is not None and self.ctx is not None:
            return Digest(self.sink.count_rows(self.sink.periphery(self.dest.options, self.ctx)), 0)
        return side_digest(self.side, self.columns, self.logical, self.json_null, readers=self.readers,
                           batch_rows=self.batch_rows, stop=stop, count_only=self.mode == "count")

    def _located(self, result: Verification, stop: threading.Event, splits: Sequence[Split] | None) -> Verification:
        """The first differing keys, from the source as it is now, where the copy is of the source's rows."""
        spec = self.spec
        if (spec.transforms or self.dest.transforms or spec.source.incremental is not None or self.side is None
                or self.target is None or self.target.meet != "replaced" or self.mode != "checksum"):
            return result
        try:
            source = Side("source", spec.source, f"{spec.source.plugin} source")
            found = compare(source, self.side, samples=SAMPLES, readers=self.readers, batch_rows=self.batch_rows,
                            stop=stop, left_splits=splits)
        except Exception as exc:
            self.log.warning("verify.locate_failed", error=str(exc))
            return result
        sent = result.digest_expected
        reason = result.reason
        if sent is not None and found.left_digest != sent:
            reason = (f"{reason}; the source changed since the run (it gives {found.left_digest} now, "
                      f"{sent} was sent), so the differences below may be the source's")
        keyed = found.columns.key_left
        return dataclasses.replace(result, reason=reason, differences=dict(found.counts),
                                   samples=tuple(d.to_dict(keyed, found.columns.left) for d in found.samples),
                                   differing_splits=sorted(k for k in (found.splits or {}).get("differing", {}) if k))


def jsonl(side: Side) -> bool:
    """A jsonl side has one null: the JSON ``null`` and SQL NULL are one value there."""
    return side.source.plugin == "file" and getattr(side.source.options, "format", None) == "jsonl"


def readback_spec(dest: DestinationSpec) -> dict[str, Any]:
    """The source spec that reads what ``dest`` holds (:func:`wormhole.verify.task.readback`)."""
    from wormhole.verify.task import readback  # the task module imports the database expansion

    return readback(dest)
