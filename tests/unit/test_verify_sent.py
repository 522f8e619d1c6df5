"""What a run sent each destination, as digests (``settings.verify``, :mod:`wormhole.verify.sent`): only the
rows the store accepted count, a split aborted for a retry starts again, a split counts once sealed, and the
row hashes of a batch are made once for every destination that takes it under the same rules."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from wormhole.errors import InvalidTaskConfig
from wormhole.plugins.base import Batch, Rejected, WriteResult
from wormhole.plugins.batch import rows_of
from wormhole.plugins.schema import Column, Schema
from wormhole.task_spec import TaskSpec
from wormhole.verify.checksum import CHECKSUM_VERSION, Digest, digest
from wormhole.verify.sent import SentDigests, recorded_digest, verifying

SCHEMA = Schema((Column("id", "int"), Column("name", "string"), Column("amount", "decimal", precision=12, scale=2)))
ROWS = [(i, f"n{i}" if i % 3 else None, Decimal(i) / 4) for i in range(1, 11)]


class Store:
    """A SplitWriter that refuses the rows whose id it is told to."""

    def __init__(self, refuse: frozenset[int] = frozenset()) -> None:
        self.refuse = refuse
        self.ended: list[str] = []

    def open(self) -> None: ...
    def flush(self) -> None: ...
    def close(self) -> None: ...

    def write(self, batch: Batch) -> WriteResult:
        return self.write_split("", batch)

    def write_split(self, split_id: str, batch: Batch) -> WriteResult:
        rows = rows_of(batch)
        bad = tuple(Rejected(r, "refused") for r in rows if r[0] in self.refuse)
        return WriteResult(written=len(rows) - len(bad), rejected=bad)

    def end_split(self, split_id: str, rows: int) -> None:
        self.ended.append(split_id)

    def abort_split(self, split_id: str) -> None: ...


def of(rows: list[tuple[Any, ...]]) -> Digest:
    return digest([Batch.of_rows(rows, SCHEMA).arrow_form])


def test_only_the_rows_the_store_accepted_count_once_their_split_is_sealed() -> None:
    sent = SentDigests(SCHEMA, "value")
    writer = verifying(Store(refuse=frozenset({3, 7})), sent)
    writer.write_split("s1", Batch.of_rows(ROWS[:5], SCHEMA))
    writer.write_split("s2", Batch.of_rows(ROWS[5:], SCHEMA))
    assert sent.total() == Digest.empty()  # nothing is durable yet
    writer.end_split("s1", 4)
    writer.end_split("s2", 4)
    accepted = [r for r in ROWS if r[0] not in (3, 7)]
    assert sent.total() == of(accepted) and sent.total().rows == 8
    assert sent.total() != of(ROWS)
    assert sent.sealed("s1") == of([r for r in ROWS[:5] if r[0] != 3])
    assert sent.splits() == 2


def test_a_split_aborted_for_a_retry_starts_again() -> None:
    sent = SentDigests(SCHEMA, "value")
    writer = verifying(Store(), sent)
    writer.write_split("s1", Batch.of_rows(ROWS[:3], SCHEMA))
    writer.abort_split("s1")
    writer.write_split("s1", Batch.of_rows(ROWS[:5], SCHEMA))
    writer.end_split("s1", 5)
    assert sent.total() == of(ROWS[:5])


def test_each_split_digest_is_recorded_final_before_the_store_commits_the_split() -> None:
    """The digest is recorded before the store's ``end_split`` (a kill right after the commit must not leave a held
    split without it), of the rows the store accepted; a split sent again after an abort records its new digest."""
    store, sent = Store(refuse=frozenset({3})), SentDigests(SCHEMA, "value")
    recorded: list[tuple[str, Digest, list[str]]] = []
    writer = verifying(store, sent, lambda split_id, d: recorded.append((split_id, d, list(store.ended))))
    writer.write_split("s1", Batch.of_rows(ROWS[:2], SCHEMA))
    writer.write_split("s1", Batch.of_rows(ROWS[2:5], SCHEMA))
    writer.end_split("s1", 4)
    assert recorded == [("s1", of([r for r in ROWS[:5] if r[0] != 3]), [])]  # before s1's commit
    assert sent.sealed("s1") == recorded[0][1]
    writer.write_split("s2", Batch.of_rows(ROWS[5:7], SCHEMA))
    writer.abort_split("s2")
    writer.write_split("s2", Batch.of_rows(ROWS[5:], SCHEMA))
    writer.end_split("s2", 5)
    assert recorded[1:] == [("s2", of(ROWS[5:]), ["s1"])]
    writer.end_split("s3", 0)  # a split that brought no rows: the empty digest, recorded all the same
    assert recorded[2][:2] == ("s3", Digest.empty())
    sent.failed = "a batch could not be hashed"
    writer.end_split("s4", 0)  # not verified anyway: no digest that could pass a copy is recorded
    assert len(recorded) == 3 and store.ended == ["s1", "s2", "s3", "s4"]


def test_a_batch_is_hashed_once_for_every_destination_with_the_same_rules() -> None:
    batch = Batch.of_rows(ROWS, SCHEMA)
    one, two, jsonl = SentDigests(SCHEMA, "value"), SentDigests(SCHEMA, "value"), SentDigests(SCHEMA, "null")
    first = one.hashes(batch)
    assert two.hashes(batch) is first  # the memo's
    assert jsonl.hashes(batch) is not first  # other rules, its own hashes


def test_a_writer_without_splits_counts_every_accepted_row_and_payloads_round_trip() -> None:
    sent = SentDigests(SCHEMA, "value")

    class Plain:
        def open(self) -> None: ...
        def flush(self) -> None: ...
        def close(self) -> None: ...

        def write(self, batch: Batch) -> WriteResult:
            return WriteResult(written=len(batch))

    writer = verifying(Plain(), sent)
    assert not hasattr(writer, "write_split")
    writer.write(Batch.of_rows(ROWS, SCHEMA))
    assert sent.total() == of(ROWS)
    assert recorded_digest({"digest": str(sent.total()), "checksum_version": CHECKSUM_VERSION}) == of(ROWS)
    assert recorded_digest({"digest": "1:00", "checksum_version": -1}) is None  # another version: not comparable
    assert verifying(Plain(), None).__class__ is Plain


def test_verify_is_a_setting_of_the_local_engine_named_when_wrong() -> None:
    task = {"source": {"plugin": "stream", "params": {"rows": 10}},
            "destinations": [{"id": "o", "plugin": "file", "params": {"path": "/tmp/x", "format": "csv"}}]}
    assert TaskSpec.from_mapping(task | {"settings": {"verify": "checksum"}}).settings.verify == "checksum"
    with pytest.raises(InvalidTaskConfig) as spark:
        TaskSpec.from_mapping(task | {"settings": {"verify": "count", "engine": "spark"}})
    assert any(p.startswith("settings.verify: 'count' needs engine 'local'") for p in spark.value.problems)
    with pytest.raises(InvalidTaskConfig) as wrong:
        TaskSpec.from_mapping(task | {"settings": {"verify": "rows"}})
    assert any(p.startswith("settings.verify") for p in wrong.value.problems), wrong.value.problems


def test_counting_hashes_nothing_and_counts_the_accepted_rows() -> None:
    sent = SentDigests(SCHEMA, "value", count_only=True)
    writer = verifying(Store(refuse=frozenset({3})), sent)
    batch = Batch.of_rows(ROWS, SCHEMA)
    writer.write_split("s1", batch)
    writer.end_split("s1", 9)
    assert sent.total() == Digest(9, 0)
    assert not batch.memo  # no row hashed
