"""The store contract: what every store promises through its roles, tested the same way for each.

``StoreContract`` is a test class without a ``Test`` prefix, so it is collected only where a module
subclasses it and provides the ``store`` fixture (a :class:`~tests.contract.harness.StoreHarness`):
``tests/contract/test_store_contract.py`` for the stores without Spark, and
``tests/spark/test_contract_hive.py`` for hive on the test run's one SparkSession. A case listed in the
harness's ``known_defects`` runs as a strict xfail: it fails loudly once the store is fixed.
"""

from __future__ import annotations

import pickle
from decimal import Decimal
from typing import Any

import pytest

from tests.contract.harness import ROWS, StoreHarness, ids, row
from tests.plugin_helpers import SCHEMA, read_ctx, run_destination, write_ctx
from wormhole.plugins.base import Row, Split, WriterPeriphery
from wormhole.plugins.batch import as_batch

SEED = [row(i) for i in range(1, 5)]
"""Rows committed before the run under test: the data a rollback must keep."""
NEW = [row(i) for i in range(100, 106)]
"""The run under test's rows."""


def same(want: Any, got: Any) -> bool:
    """Equal and of the same type; decimals to the digit (scale included), json values as JSON."""
    if type(want) is not type(got):
        return False
    if isinstance(want, Decimal):
        return want.as_tuple() == got.as_tuple()
    if isinstance(want, (dict, list)):
        return bool(_json_value(want) == _json_value(got))
    return bool(want == got)


def _json_value(v: Any) -> Any:
    """A JSON value to compare by its numbers' values: a store's reader gives a fraction as the Decimal of its
    digits (exact), the rows under test hold Python floats; key order is the store's."""
    if isinstance(v, dict):
        return {k: _json_value(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_json_value(x) for x in v]
    if isinstance(v, bool) or v is None:
        return (type(v).__name__, v)  # never equal to a number
    return Decimal(repr(v)) if isinstance(v, float) else v


def mismatches(want: list[Row], got: list[Row]) -> list[str]:
    out = []
    for w, g in zip(want, got, strict=True):
        for name, a, b in zip(SCHEMA.names, w, g, strict=True):
            if not same(a, b):
                out.append(f"id {w[0]} column {name}: wrote {a!r} ({type(a).__name__}), "
                           f"read {b!r} ({type(b).__name__})")
    return out


class StoreContract:
    """The contract tests; a subclass provides the ``store`` fixture."""

    @pytest.fixture(autouse=True)
    def _known_defect(self, request: pytest.FixtureRequest, store: StoreHarness) -> None:
        reason = store.known_defects.get(request.node.originalname)
        if reason is not None:
            request.applymarker(pytest.mark.xfail(strict=True, reason=reason))

    def _prepared(self, store: StoreHarness, run_id: int) -> tuple[Any, Any, WriterPeriphery]:
        options = store.sink_options()
        ctx = write_ctx(SCHEMA, run_id=run_id, concurrency=2)
        periphery = store.sink.periphery(options, ctx)
        periphery.prepare()
        return options, ctx, periphery

    def _write(self, store: StoreHarness, prepared: tuple[Any, Any, WriterPeriphery], rows: list[Row],
               worker: int = 0, flush: bool = True) -> Any:
        options, ctx, periphery = prepared
        writer = store.sink.writer(options, ctx, periphery, worker)
        writer.open()
        try:
            result = writer.write(as_batch(rows))
            if flush:
                writer.flush()
        finally:
            writer.close()
        return result

    # -- round trip -------------------------------------------------------------------------------

    def test_every_logical_type_round_trips(self, store: StoreHarness) -> None:
        results = run_destination(store.sink, store.sink_options(), [ROWS[:3], ROWS[3:]])
        assert sum(r.written for r in results) == len(ROWS)
        assert [r.reason for res in results for r in res.rejected] == []
        if not store.keeps_rows:
            assert store.visible_ids() == []  # declared: the store discards what it takes
            return
        raw = store.source_params() if store.source is not None else None
        got = sorted(store.read_rows(raw), key=lambda r: r[0]) if raw is not None else []
        want = sorted((store.expected(r) for r in ROWS), key=lambda r: r[0])
        assert len(got) == len(want), got
        assert mismatches(want, got) == [], [d.documented for d in store.deviations]
        assert store.visible_ids() == ids(ROWS)

    # -- rollback ---------------------------------------------------------------------------------

    def test_rollback_without_prepare_is_harmless(self, store: StoreHarness) -> None:
        store.commit_rows([SEED], run_id=1)
        before = store.snapshot()
        periphery = store.sink.periphery(store.sink_options(), write_ctx(SCHEMA, run_id=2))
        periphery.rollback()
        periphery.rollback()
        assert store.snapshot() == before
        assert store.visible_ids() == (ids(SEED) if store.keeps_rows else [])

    def test_rollback_twice_after_a_partial_write_keeps_existing_data(self, store: StoreHarness) -> None:
        store.commit_rows([SEED], run_id=1)
        self._partial_write_rolled_back_twice(store)
        assert store.visible_ids() == (ids(SEED) if store.keeps_rows else [])

    def test_rollback_twice_after_a_partial_write_on_a_fresh_location(self, store: StoreHarness) -> None:
        self._partial_write_rolled_back_twice(store)
        assert store.visible_ids() == []

    def _partial_write_rolled_back_twice(self, store: StoreHarness) -> None:
        before = store.snapshot()
        prepared = self._prepared(store, run_id=2)
        result = self._write(store, prepared, NEW, flush=False)  # a writer that failed mid-stream
        assert result.written == len(NEW)
        prepared[2].rollback()
        prepared[2].rollback()
        assert store.snapshot() == before

    # -- rejected rows ----------------------------------------------------------------------------

    def test_rejected_rows_are_counted_with_reasons(self, store: StoreHarness) -> None:
        good = [row(10), row(11)]
        bad = [store.refused] if store.refused is not None else []
        batch = [good[0], *bad, good[1]]
        prepared = self._prepared(store, run_id=1)
        result = self._write(store, prepared, batch)
        prepared[2].commit()
        assert result.written + len(result.rejected) == len(batch)
        assert [r.row for r in result.rejected] == bad  # None declares: the store accepts every row
        assert all(isinstance(r.reason, str) and r.reason.strip() for r in result.rejected), result.rejected
        assert store.visible_ids() == (ids(good) if store.keeps_rows else [])

    # -- commit -----------------------------------------------------------------------------------

    def test_commit_is_atomic_and_a_rolled_back_run_keeps_it(self, store: StoreHarness) -> None:
        store.commit_rows([SEED], run_id=1)
        seen = ids(SEED) if store.keeps_rows else []
        prepared = self._prepared(store, run_id=2)
        self._write(store, prepared, NEW[:3], worker=0)
        self._write(store, prepared, NEW[3:], worker=1)
        assert store.visible_ids() == seen  # nothing of the run before commit
        prepared[2].commit()
        if store.keeps_rows:
            seen = ids(NEW) if store.replaces_target else ids(SEED + NEW)
        assert store.visible_ids() == seen  # all of it after
        prepared[2].commit()  # idempotent
        assert store.visible_ids() == seen
        run_destination(store.sink, store.sink_options(), [[row(200)], [row(201)]], run_id=3, commit=False)
        assert store.visible_ids() == seen

    # -- source side ------------------------------------------------------------------------------

    def _source_or_skip(self, store: StoreHarness) -> Any:
        if store.source is None:
            pytest.skip(f"{store.plugin} has no source role")
        return store.source

    def test_splits_have_unique_stable_ids_a_resource_mark_and_pickle(self, store: StoreHarness) -> None:
        source = self._source_or_skip(store)
        raw = store.prepare_source([[row(i) for i in range(0, 30)], [row(i) for i in range(30, 50)]])
        options = store.source_options(raw)

        def splits() -> list[Split]:
            ctx = read_ctx()
            source.reader(options, ctx).schema()
            return list(source.splitter(options, ctx).split(4))

        first = splits()
        assert first
        assert len({s.id for s in first}) == len(first)
        assert [s.id for s in splits()] == [s.id for s in first]
        assert all(isinstance(s.resource_mark, str) and s.resource_mark for s in first)
        assert [pickle.loads(pickle.dumps(s)) for s in first] == first

    def test_reading_every_split_yields_every_row_once(self, store: StoreHarness) -> None:
        self._source_or_skip(store)
        rows = [row(i) for i in range(0, 240)]
        raw = store.prepare_source([rows[:100], rows[100:170], rows[170:]])
        assert ids(store.read_rows(raw)) == ids(rows)
