"""The batch as the exchange hands it on: Arrow columns, exact columns for what their types cannot hold, rows_of."""

from __future__ import annotations

import datetime as dt
import pickle
import subprocess
import sys
import threading
from collections.abc import Sequence
from decimal import Decimal

import pyarrow as pa
import pytest

from wormhole.config import ExchangeConf
from wormhole.exchange.exchanger import BufferedLineExchanger
from wormhole.exchange.storage import RAMStorage
from wormhole.plugins.base import Batch, Column, Schema, batch_memo
from wormhole.plugins.batch import BadValues, arrow_schema, exact_codec, rows_of
from wormhole.plugins.values import JSON_NULL

SCHEMA = Schema((Column("id", "int", False), Column("u", "int", unsigned=True),
                 Column("d", "decimal", precision=65, scale=30), Column("p", "decimal", precision=12, scale=2),
                 Column("f", "float"), Column("s", "string"), Column("b", "bytes"), Column("ok", "bool"),
                 Column("day", "date"), Column("at", "datetime"), Column("j", "json")))

AWKWARD = [
    (1, 2**64 - 1, Decimal("-" + "9" * 35 + "." + "9" * 30), Decimal("-0.01"), 1.1, "utf8mb4 \U0001f600 é",
     b"\x00\xff\t\n\\", True, dt.date(1, 1, 1), dt.datetime(9999, 12, 31, 23, 59, 59, 999999), {"a": [1, None]}),
    (2, 0, Decimal("0E-30"), Decimal("12345678.90"), -0.0, "", b"", False, dt.date(2020, 2, 29),
     dt.datetime(1970, 1, 1), JSON_NULL),
    (3, None, None, None, None, None, None, None, None, None, None),
]


def test_rows_to_arrow_and_back_is_exact_on_awkward_values() -> None:
    """Rows made a batch are Arrow columns of their types, and come back exactly (JSON null apart from NULL)."""
    batch = Batch.of_rows(AWKWARD, SCHEMA).arrow(SCHEMA)
    assert batch.schema.field("u").type == pa.uint64()
    assert batch.schema.field("d").type == pa.decimal256(65, 30)
    assert batch.schema.field("p").type == pa.decimal128(12, 2)
    assert batch.schema.field("at").type == pa.timestamp("us")
    assert batch.column(10).to_pylist() == ['{"a": [1, null]}', "null", None]  # JSON null is text, SQL NULL null
    back = rows_of(Batch.of_arrow(batch))
    assert list(back) == AWKWARD
    assert back[1][10] is JSON_NULL


EXOTIC_SCHEMA = Schema((Column("id", "int"), Column("big", "int"), Column("free", "decimal"),
                        Column("p", "decimal", precision=5, scale=2), Column("day", "date"), Column("at", "datetime"),
                        Column("s", "string")))
EXOTIC = [
    (1, 2**70, Decimal("1.50"), Decimal("1.5"), "0000-00-00", dt.datetime(2020, 1, 1, 12,
     tzinfo=dt.timezone(dt.timedelta(hours=8))), "bad \udcff"),
    (2, -(2**64), Decimal("-1E+3"), Decimal("123.45"), dt.date(2020, 2, 29), "0000-00-00 00:00:00", "ok"),
    (3, 5, Decimal("0.000000000000000000001"), None, "infinity", None, None),
]


def test_values_arrow_cannot_hold_travel_in_exact_columns_and_come_back_exactly() -> None:
    """An integer beyond 64 bits, a decimal of another scale than its column's or of none declared, a zero
    date kept as text, an aware datetime, a lone surrogate: each column that holds one is an exact column
    (the values' text, the logical type in the field), and every value comes back as it was, type and text."""
    batch = Batch.of_rows(EXOTIC, EXOTIC_SCHEMA)
    form = batch.arrow_form
    assert form.schema.field("id").type == pa.int64() and exact_codec(form.schema.field("id")) is None
    for name in ("big", "free", "p", "day", "at", "s"):
        field = form.schema.field(name)
        assert field.type == pa.binary() and exact_codec(field) == b"text", name
        kind = next(c.type for c in EXOTIC_SCHEMA.columns if c.name == name)
        assert field.metadata[b"wormhole.type"] == kind.encode()
    assert form.column("day").to_pylist() == [b"0000-00-00", b"2020-02-29", b"infinity"]
    assert form.column("big")[0].as_py() == str(2**70).encode()
    back = rows_of(Batch.of_arrow(form))  # from the Arrow columns alone, not the rows they were made of
    assert repr(back) == repr(tuple(EXOTIC))
    assert pickle.loads(pickle.dumps(batch)) == batch


def test_a_value_of_another_type_travels_as_it_came_and_typed_columns_name_its_row() -> None:
    """A value of another Python type than its column's keeps its type (an exact column of pickles): a row
    writer sees what the reader gave; asked for typed columns, the batch names that row (BadValues)."""
    schema = Schema((Column("i", "int"), Column("f", "float"), Column("day", "date"), Column("j", "json")))
    rows = [(1, 1.5, dt.date(2020, 1, 1), {"a": 1}),
            (1.5, 2, dt.date(2020, 1, 2), [1]),  # 1.5 in an int column: pa.array would make it 1
            (True, 1.0, dt.date(2020, 1, 3), None),
            (3, 2**60 + 1, dt.date(2020, 1, 4), None),  # an int without an exact double
            (4, 1.0, dt.datetime(2020, 1, 5, 12), None),  # a datetime would lose its time
            (5, 1.0, dt.date(2020, 1, 6), float("nan"))]  # NaN is not JSON
    batch = Batch.of_rows(rows, schema)
    assert exact_codec(batch.arrow_form.schema.field("i")) == b"python"
    assert repr(rows_of(Batch.of_arrow(batch.arrow_form))) == repr(tuple(rows))
    with pytest.raises(BadValues) as caught:
        batch.arrow(schema)
    assert sorted(caught.value.bad) == [1, 2, 3, 4, 5]
    assert "a float (1.5) in a int column" in caught.value.bad[1]
    good = batch.without(caught.value.bad).arrow(schema)
    assert rows_of(Batch.of_arrow(good)) == (rows[0],)
    assert Batch.of_arrow(good).native_arrow is good and batch.native_arrow is None


def test_each_form_is_made_once_and_shared_by_every_reader() -> None:
    batch = Batch.of_arrow(pa.RecordBatch.from_arrays([pa.array([1, 2, 3])], schema=arrow_schema(
        Schema((Column("id", "int"),)))))
    seen: list[object] = []
    threads = [threading.Thread(target=lambda: seen.append(rows_of(batch))) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(s is seen[0] for s in seen) and seen[0] == ((1,), (2,), (3,))
    assert batch_memo(batch) is batch_memo(batch) is batch.memo
    assert len(batch) == 3 == batch.num_rows


def test_the_exchange_hands_arrow_batches_on_without_making_tuples() -> None:
    schema = Schema((Column("id", "int"), Column("s", "string")))
    storage = RAMStorage("d", ExchangeConf(queue_rows=1 << 20, queue_bytes=1 << 30, spill_rows=1))
    exchanger = BufferedLineExchanger([storage], batch_rows=1000, stop=threading.Event())
    big = pa.RecordBatch.from_arrays([pa.array(range(2500)), pa.array(["x" * 10] * 2500)],
                                     schema=arrow_schema(schema))
    exchanger.send(Batch.of_arrow(big))
    exchanger.flush()
    storage.close_input()
    got = [b.rows for b in BufferedLineExchanger.receive(storage)]
    assert [len(r) for r in got] == [1000, 1000, 500]
    assert all(r.native_arrow is not None and r._rows is None for r in got)  # no tuple was made
    assert exchanger.bytes_sent == sum(r.nbytes for r in got)


def test_a_batch_pickles_as_its_arrow_columns() -> None:
    schema = Schema((Column("id", "int"), Column("j", "json")))
    for batch in (Batch.of_rows([(1, {"a": 1})], schema), Batch.of_arrow(Batch.of_rows([(1, {"a": 1})]).arrow(schema))):
        copy = pickle.loads(pickle.dumps(batch))
        assert copy._rows is None and rows_of(copy) == ((1, {"a": 1}),)


def test_an_int_in_a_float_column_keeps_its_type_and_converts_when_typed() -> None:
    schema = Schema((Column("f", "float"),))
    batch = Batch.of_rows([(2,), (1.5,)], schema)
    assert rows_of(Batch.of_arrow(batch.arrow_form)) == ((2,), (1.5,))
    assert rows_of(Batch.of_arrow(batch.arrow(schema))) == ((2.0,), (1.5,))


def test_a_batch_is_no_sequence_of_rows() -> None:
    """Writers take rows from rows_of only: a batch cannot be iterated nor indexed as rows."""
    batch = Batch.of_rows([(1,)])
    assert not isinstance(batch, Sequence)
    with pytest.raises(TypeError):
        iter(batch)  # type: ignore[call-overload]
    with pytest.raises(TypeError):
        batch[0]  # type: ignore[index]


def test_the_data_plane_does_not_load_pandas_and_uses_the_system_allocator() -> None:
    """pyarrow loads pandas (installed here, with the spark extra) on its first pa.array unless the CLI's
    start hid it once: a batch's way through the stores must not pull ~40 MiB of pandas in; and freed
    batches go back to the system allocator (mimalloc, pyarrow's default, kept ~50 MiB more). Every module
    the command line imports is imported first, as the CLI's start does: one that makes an Arrow value at
    import would have pyarrow look for pandas before it is hidden."""
    code = ("import sys\nimport wormhole.cli\nfrom wormhole.plugins.batch import arrow_for_this_process, Batch\n"
            "from wormhole.plugins.base import Schema, Column\narrow_for_this_process()\n"
            "Batch.of_rows([(1, 'a')]).arrow(Schema((Column('i', 'int'), Column('s', 'string'))))\n"
            "assert 'pandas' not in sys.modules, 'pandas was loaded'\n"
            "import pyarrow as pa\nassert pa.default_memory_pool().backend_name == 'system'\n"
            "import pyarrow as pa\nassert pa.table({'a': [1]}).to_pandas().shape == (1, 1)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr


def test_a_decimal_without_a_declared_scale_comes_back_at_its_own_scale() -> None:
    """A file's decimal column declares no scale: its Arrow form pads every value to scale 18, and the text
    a destination writes must not show that padding (2.25 stays 2.25 after a filter, never 2.250000000000000000)."""
    from wormhole.plugins.arrow_text import own_arrow, own_text_arrow

    free = Schema((Column("d", "decimal"),))
    values = [(Decimal("2.25"),), (Decimal("-0.1"),), (Decimal("100"),), (Decimal("0"),), (None,)]
    batch = Batch.of_arrow(Batch.of_rows(values, free).arrow(free))
    assert [str(v) for (v,) in rows_of(batch)] == ["2.25", "-0.1", "100", "0", "None"]
    assert own_text_arrow(batch) is None and own_arrow(batch) is not None  # text writers take the tuples
    declared = Schema((Column("d", "decimal", precision=12, scale=2),))
    kept = Batch.of_arrow(Batch.of_rows([(Decimal("1.5"),)], declared).arrow(declared))
    assert [str(v) for (v,) in rows_of(kept)] == ["1.50"] and own_text_arrow(kept) is not None


def test_a_free_scale_decimal_of_38_digits_comes_back_whole() -> None:
    # The default decimal context holds 28 digits: trimming in it rounded the value.
    schema = Schema((Column("d", "decimal"),))
    values = [Decimal("12345678901234567890.123456789012345678"), Decimal("-99999999999999999999"), Decimal("2.5")]
    batch = Batch.of_rows([(v,) for v in values], schema).arrow(schema)
    assert [repr(v) for (v,) in rows_of(Batch.of_arrow(batch))] == [repr(v) for v in values]


def _encoded(rows: list[bytes]) -> Batch:
    """Rows in a made-up encoding: each row's bytes, decoded back to (its text,) when asked."""
    from itertools import accumulate

    from wormhole.plugins.batch import EncodedRows, Encoding

    def decode(encoded: EncodedRows, i: int) -> tuple[str]:
        return (bytes(encoded.span(i, i + 1)).decode(),)

    return Batch.of_encoded(EncodedRows(Encoding("test.bytes", ("text",)), b"".join(rows),
                                       list(accumulate(map(len, rows))), decode))


def test_an_encoded_batch_goes_through_the_exchange_undecoded_and_counts_its_bytes() -> None:
    storage = RAMStorage("d", ExchangeConf(queue_rows=1 << 20, queue_bytes=1 << 30, spill_rows=1))
    exchanger = BufferedLineExchanger([storage], batch_rows=2, stop=threading.Event())
    batch = _encoded([b"a", b"bb", b"", b"dddd"])
    exchanger.send(batch)  # more rows than batch_rows: the reader cut it already, it goes whole
    exchanger.flush()
    storage.close_input()
    (got,) = [b.rows for b in BufferedLineExchanger.receive(storage)]
    assert got is batch and len(got) == 4 and got._rows is None  # nothing was decoded on the way
    assert exchanger.bytes_sent == 7 == got.encoded_nbytes
    assert got.encoded is not None and bytes(got.encoded.span(1, 3)) == b"bb" and bytes(got.encoded.span(2, 2)) == b""
    assert list(rows_of(got)) == [("a",), ("bb",), ("",), ("dddd",)]  # values only when asked, by its decoder
    assert list(rows_of(pickle.loads(pickle.dumps(got)))) == [("a",), ("bb",), ("",), ("dddd",)]


def test_a_row_writer_takes_tuples_from_rows_of_and_a_reader_s_tuples_become_one_batch() -> None:
    from wormhole.plugins.batch import Batch, as_batch, rows_of

    made = as_batch([(1, "a"), (2, "b")])
    assert isinstance(made, Batch) and rows_of(made) == ((1, "a"), (2, "b"))
    assert as_batch(made) is made  # a batch goes on as it is
    columns = Batch.of_arrow(pa.RecordBatch.from_arrays([pa.array([1, 2])], schema=arrow_schema(
        Schema((Column("id", "int"),)))))
    assert rows_of(columns) == ((1,), (2,)) and rows_of(columns) is rows_of(columns)  # made once


def test_spark_hands_a_partition_of_own_form_columns_to_the_writers_as_arrow() -> None:
    pytest.importorskip("pyspark")
    from wormhole.spark.types import writer_batch

    plain = Schema((Column("id", "int"), Column("s", "string"), Column("at", "datetime")))
    record = pa.RecordBatch.from_arrays([pa.array([1, None]), pa.array(["a", "b"]),
                                         pa.array([dt.datetime(2020, 1, 1), None], pa.timestamp("us"))],
                                        names=["id", "s", "at"])
    batch = writer_batch(plain, record)
    assert batch.native_arrow is not None and batch.native_arrow.schema.equals(arrow_schema(plain), check_metadata=True)
    assert list(rows_of(batch)) == [(1, "a", dt.datetime(2020, 1, 1)), (None, "b", None)]
    decimal = Schema((Column("d", "decimal", precision=12, scale=2),))  # travels as its exact text: the rows
    texts = writer_batch(decimal, pa.RecordBatch.from_arrays([pa.array(["1.5", None])], names=["d"]))
    assert texts.native_arrow is None and list(rows_of(texts)) == [(Decimal("1.5"),), (None,)]
