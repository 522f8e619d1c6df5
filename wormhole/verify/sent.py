"""What a run sent each destination, as digests (``settings.verify``; issue 39, item 1): the sent half of
verifying a copy in the run that made it.

A :class:`VerifyingWriter` sits right in front of the store's writer (behind the destination's own
transforms), so what it hashes is what the store was given. Each batch's row hashes are made once and shared
by every destination that takes the same batch with the same rules (the batch memo); the rows the store
rejected are taken out again, so a destination's digest is of the rows it accepted. Per split: a split
written again after a retry starts its digest again (``abort_split``), and a split's digest counts once the
store has made the split durable (``end_split``). No row is read again for this: the hashes are of the
batches already in memory.

A split's digest is final once the store has accepted its last batch, before the store commits it: that is
when it is recorded in the task database (``record``, waited for), so a kill right after the commit never
leaves a split the destination holds without its digest for the run that resumes.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from wormhole.plugins.base import Batch, SplitWriter, WriteResult
from wormhole.plugins.batch import batch_memo
from wormhole.plugins.schema import Schema
from wormhole.verify.checksum import CHECKSUM_VERSION, Digest, JsonNull, row_hashes

_STRIPES = tuple(threading.Lock() for _ in range(64))
"""Locks by batch (its id, striped): a batch's hashes are made by one destination's writer, not each."""

WHOLE = ""
"""The split key of a destination that does not make splits durable: its rows count as one."""


class SentDigests:
    """One destination's digests of the rows its store accepted in this run: per split, pending until the
    split is durable (a SplitWriter's), then sealed. Thread-safe: the destination's writer threads share it."""

    def __init__(self, schema: Schema, json_null: JsonNull, *, count_only: bool = False) -> None:
        """``count_only``: only the rows are counted (``settings.verify: count``), none is hashed."""
        self.schema = schema
        self.count_only = count_only
        self.logical: Mapping[str, str] = {c.name: c.type for c in schema.columns}
        self.json_null: JsonNull = json_null
        self._lock = threading.Lock()
        self._pending: dict[str, Digest] = {}
        self._sealed: dict[str, Digest] = {}
        self.failed: str | None = None
        """Why a batch could not be hashed (the destination is then not verified), else None."""

    def hashes(self, batch: Batch) -> Any:
        """The row hashes of ``batch`` under this destination's rules, made once per batch and rules."""
        key = ("verify.row_hashes", CHECKSUM_VERSION, tuple(self.logical.items()), self.json_null)
        memo = batch_memo(batch)
        found = memo.get(key)
        if found is None:
            # Destinations take a batch at about the same time: the first hashes it, the others wait for that.
            with _STRIPES[id(batch) % len(_STRIPES)]:
                found = memo.get(key)
                if found is None:
                    found = memo[key] = row_hashes(batch.arrow_form, logical=self.logical, json_null=self.json_null)
        return found

    def add(self, split_id: str, batch: Batch, result: WriteResult) -> None:
        """The rows of ``batch`` the store accepted (``result``: less its rejected rows) count for ``split_id``."""
        if self.failed is not None or not len(batch):
            return
        if self.count_only:
            with self._lock:
                self._pending[split_id] = self._pending.get(split_id, Digest.empty()) + Digest(
                    len(batch) - len(result.rejected) - result.stopped, 0)
            return
        try:
            sent = Digest.of(self.hashes(batch))
            if result.rejected:
                rows = [r.row for r in result.rejected]
                refused = Digest.of(row_hashes(Batch.of_rows(rows, self.schema).arrow_form, logical=self.logical,
                                               json_null=self.json_null))
                sent = Digest(sent.rows - refused.rows, (sent.total - refused.total) % (1 << 64))
            if result.stopped:
                # Rows the writer never tried (over the record limit: the destination fails anyway).
                self.failed = f"{result.stopped} row(s) of a batch were not tried"
                return
        except (TypeError, KeyError, ValueError) as exc:
            self.failed = f"a batch could not be hashed: {exc}"
            return
        with self._lock:
            self._pending[split_id] = self._pending.get(split_id, Digest.empty()) + sent

    def final(self, split_id: str) -> Digest | None:
        """The digest of the rows the store accepted of ``split_id`` (final once its last batch is written, before the
        split is made durable); None when a batch could not be hashed (the destination is not verified then)."""
        with self._lock:
            return None if self.failed is not None else self._pending.get(split_id, Digest.empty())

    def seal(self, split_id: str) -> None:
        """``split_id`` is durable in the destination: its digest counts."""
        with self._lock:
            self._sealed[split_id] = self._pending.pop(split_id, Digest.empty())

    def forget(self, split_id: str) -> None:
        """``split_id``'s rows were discarded (a retry writes them again)."""
        with self._lock:
            self._pending.pop(split_id, None)

    def sealed(self, split_id: str) -> Digest | None:
        with self._lock:
            return self._sealed.get(split_id)

    def total(self) -> Digest:
        """Every sealed split's digest, and the rows of a destination that keeps no splits (``WHOLE``)."""
        with self._lock:
            out = Digest.empty()
            for part in (*self._sealed.values(), *([self._pending[WHOLE]] if WHOLE in self._pending else [])):
                out += part
            return out

    def splits(self) -> int:
        with self._lock:
            return len(self._sealed)


class VerifyingWriter:
    """A writer (a destination that keeps no splits) whose accepted rows count in ``sent``."""

    def __init__(self, inner: Any, sent: SentDigests) -> None:
        self.inner = inner
        self.sent = sent

    def open(self) -> None:
        self.inner.open()

    def write(self, batch: Batch) -> WriteResult:
        result: WriteResult = self.inner.write(batch)
        self.sent.add(WHOLE, batch, result)
        return result

    def flush(self) -> None:
        self.inner.flush()

    def close(self) -> None:
        self.inner.close()


Record = Callable[[str, Digest], None]
"""Records a split's final digest (split id, digest) where a resumed run finds it, and returns once it is there."""


class VerifyingSplitWriter(VerifyingWriter):
    """A SplitWriter whose accepted rows count per split, once the split is durable."""

    def __init__(self, inner: Any, sent: SentDigests, record: Record | None = None) -> None:
        """``record``: told each split's digest before the store commits the split (None: not recorded)."""
        super().__init__(inner, sent)
        self.record = record

    def write_split(self, split_id: str, batch: Batch) -> WriteResult:
        result: WriteResult = self.inner.write_split(split_id, batch)
        self.sent.add(split_id, batch, result)
        return result

    def end_split(self, split_id: str, rows: int) -> None:
        if self.record is not None and (digest := self.sent.final(split_id)) is not None:
            self.record(split_id, digest)  # before the commit: a held split always has its digest recorded
        self.inner.end_split(split_id, rows)
        self.sent.seal(split_id)

    def abort_split(self, split_id: str) -> None:
        self.sent.forget(split_id)
        self.inner.abort_split(split_id)


def verifying(inner: Any, sent: SentDigests | None, record: Record | None = None) -> Any:
    """``inner`` counting what its store accepted into ``sent`` (``inner`` itself when nothing is verified);
    ``record``: where a SplitWriter's split digests are recorded before each commit."""
    if sent is None:
        return inner
    if isinstance(inner, SplitWriter):
        return VerifyingSplitWriter(inner, sent, record)
    return VerifyingWriter(inner, sent)


def recorded_digest(payload: Mapping[str, Any] | None) -> Digest | None:
    """A digest the task database recorded, if of this checksum version: ``{"digest", "checksum_version"}``, as a
    split digest row holds it, or as the payload of a durable checkpoint row written by an older version."""
    if not payload or payload.get("checksum_version") != CHECKSUM_VERSION or not isinstance(payload.get("digest"), str):
        return None
    return Digest.parse(payload["digest"])


__all__: Sequence[str] = (
    "SentDigests",
    "VerifyingSplitWriter",
    "VerifyingWriter",
    "recorded_digest",
    "verifying",
)
