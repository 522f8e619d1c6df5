"""The csv text of an Arrow batch is, to the byte, the csv module's text of its rows (the row encoder's),
whichever way the columnar encoder takes: pyarrow's csv writer for a batch no field of which the csv
module quotes, compute kernels for the rest (quotes, line ends, a delimiter number texts hold, one column,
a NULL text holding a quote)."""

from __future__ import annotations

import datetime as dt
import random
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pyarrow.csv as pa_csv
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wormhole.plugins.arrow_text import float_text
from wormhole.plugins.base import Batch, Column, Row, Schema
from wormhole.plugins.batch import arrow_from_rows, rows_from_arrow
from wormhole.plugins.file.csv_format import CsvEncoder
from wormhole.plugins.file.options import FileWriterOptions

SCHEMA = Schema((
    Column("id", "int"), Column("f", "float"), Column("dec", "decimal", precision=12, scale=2),
    Column("s", "string"), Column("raw", "bytes"), Column("flag", "bool"), Column("day", "date"),
    Column("ts", "datetime"), Column("doc", "json"), Column("t", "string"),
))

AWKWARD = ',;\t|"\r\n \\N0e§é✓😀\x00'
"""Delimiters, the quote, line ends, a leading space, the default NULL text's characters, a delimiter number
texts hold, non-ASCII, NUL."""

QUOTING = ',;\t|"\r\n'
TEXT = st.text(st.one_of(st.sampled_from(AWKWARD), st.characters(blacklist_categories=("Cs",))), max_size=6)
PLAIN = st.text(st.one_of(st.sampled_from([c for c in AWKWARD if c not in QUOTING]),
                          st.characters(blacklist_categories=("Cs",), blacklist_characters=QUOTING)), max_size=6)
"""Text no delimiter of OPTIONS but e, 0, space and § makes the csv module quote."""
JSON = st.recursive(st.one_of(st.none(), st.booleans(), st.integers(-10**6, 10**6), st.floats(allow_nan=False,
                    allow_infinity=False), TEXT), lambda kids: st.lists(kids, max_size=3)
                    | st.dictionaries(TEXT, kids, max_size=3), max_leaves=5)
FLOATS = st.one_of(st.floats(), st.integers(-10**17, 10**17).map(float),
                   st.integers(-10**8, 10**8).map(lambda i: i / 100))
VALUES: dict[str, Any] = {
    "int": st.integers(-2**63, 2**63 - 1), "float": FLOATS,
    "decimal": st.integers(-10**12 + 1, 10**12 - 1).map(lambda i: Decimal(i).scaleb(-2)),
    "string": TEXT, "bytes": st.binary(max_size=8), "bool": st.booleans(), "date": st.dates(),
    "datetime": st.datetimes(), "json": JSON,
}
LAST_US = 315_537_897_599_999_999
"""Microseconds from 0001-01-01 to 9999-12-31 23:59:59.999999."""
OPTIONS = [(",", "\\N"), (",", ""), (";", "NULL"), ("\t", "\\N"), ("|", ""), ("e", "\\N"), ("0", ""),
           (" ", "\\N"), ("§", "\\N"), (",", 'a"b'), (",", "a\rb")]


def _texts(schema: Schema, rows: list[Row], delimiter: str, null: str, header: bool = True) -> tuple[bytes, bytes]:
    """The columnar encoder's text of the rows' Arrow batch, and the row encoder's (the csv module's) of
    the tuples that batch holds."""
    encoder = CsvEncoder(FileWriterOptions(path="unused", format="csv", delimiter=delimiter, null=null,
                                           header=header), schema)
    batch = Batch.of_arrow(arrow_from_rows(schema, rows))
    columnar = encoder.header() + encoder.encode_arrow(batch.arrow_form).to_pybytes()
    return columnar, encoder.header() + encoder.encode(list(rows_from_arrow(batch.arrow_form)))


@st.composite
def batches(draw: st.DrawFn) -> tuple[Schema, list[Row]]:
    picked = draw(st.lists(st.sampled_from(SCHEMA.columns), min_size=1, max_size=6, unique_by=lambda c: c.name))
    schema = Schema(tuple(picked))
    # Most batches plain (the fast path), some with a field to quote.
    plain = draw(st.booleans())
    rows = draw(st.lists(st.tuples(*(st.one_of(st.none(), PLAIN if plain and c.type == "string" else VALUES[c.type])
                                     for c in schema.columns)), min_size=1, max_size=12))
    return schema, rows


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.none(), FLOATS), max_size=40), st.data())
def test_float_text_is_repr_in_a_slice_of_an_array(values: list[float | None], data: st.DataObject) -> None:
    """Every float's text is ``repr`` (``.0`` spliced after a whole one), NULL kept, in an array that
    starts inside its buffers (as the stream's batches, slices of a pool, do)."""
    start = data.draw(st.integers(0, len(values)))
    stop = data.draw(st.integers(start, len(values)))
    text = float_text(pa.array(values, pa.float64()).slice(start, stop - start))
    text.validate(full=True)
    assert text.to_pylist() == [None if v is None else repr(v) for v in values[start:stop]]


@settings(max_examples=200, deadline=None)
@given(batches(), st.sampled_from(OPTIONS))
def test_the_columnar_csv_text_is_the_csv_modules(batch: tuple[Schema, list[Row]], option: tuple[str, str]) -> None:
    schema, rows = batch
    columnar, want = _texts(schema, rows, *option)
    assert columnar == want


def test_many_seeded_batches_of_awkward_values_agree() -> None:
    """Larger batches than hypothesis draws: every column, a quarter NULL, strings from the awkward characters
    (each batch holding some field to quote or not, alternately)."""
    rng = random.Random(28)
    alphabet = list(AWKWARD) + list("abcxyz -_.") * 4
    plain = [c for c in alphabet if c not in QUOTING]

    def value(kind: str, quoting: bool) -> Any:
        if rng.random() < 0.25:
            return None
        return {
            "int": lambda: rng.randint(-2**63, 2**63 - 1),
            "float": lambda: rng.choice([float(rng.randint(-10**6, 10**6)), round(rng.uniform(-1e6, 1e6), 2),
                                         rng.uniform(-1e-6, 1e-6), rng.uniform(1e15, 1e17), 0.0, -0.0]),
            "decimal": lambda: Decimal(rng.randint(-10**11, 10**11)).scaleb(-2),
            "string": lambda: "".join(rng.choices(alphabet if quoting else plain, k=rng.randint(0, 8))),
            "bytes": lambda: rng.randbytes(rng.randint(0, 9)),
            "bool": lambda: rng.random() < 0.5,
            "date": lambda: dt.date(1, 1, 1) + dt.timedelta(days=rng.randint(0, 3_652_058)),
            "datetime": lambda: dt.datetime(1, 1, 1) + dt.timedelta(microseconds=rng.randint(0, LAST_US)),
            "json": lambda: ({"k": rng.randint(0, 9), "v": "".join(rng.choice(alphabet) for _ in range(3))}
                             if quoting else rng.choice([rng.randint(-9, 9), True, [], 0.5])),
        }[kind]()

    for n in range(60):
        rows: list[Row] = [tuple(value(c.type, n % 2 == 1) for c in SCHEMA.columns) for _ in range(rng.randint(1, 300))]
        delimiter, null = OPTIONS[n % len(OPTIONS)]
        columnar, want = _texts(SCHEMA, rows, delimiter, null, header=n % 3 != 0)
        assert columnar == want, (delimiter, null)


@pytest.mark.parametrize(("delimiter", "null", "direct"), [
    (",", "\\N", True), ("\t", "", True), ("e", "\\N", False), (",", 'a"b', False)])
def test_a_batch_no_field_of_which_is_quoted_is_joined_by_pyarrows_csv_writer(
        monkeypatch: pytest.MonkeyPatch, delimiter: str, null: str, direct: bool) -> None:
    """pyarrow's writer (unquoted) joins the fields where it writes the csv module's text: not for a delimiter
    number texts hold, nor a NULL text the csv module quotes, nor a batch holding a field to quote."""
    calls: list[int] = []
    write_csv = pa_csv.write_csv

    def counted(data: Any, *args: Any, **kwargs: Any) -> None:
        calls.append(data.num_rows)
        write_csv(data, *args, **kwargs)

    monkeypatch.setattr(pa_csv, "write_csv", counted)
    schema = Schema((Column("id", "int"), Column("name", "string"), Column("amount", "float"), Column("day", "date")))
    plain: list[Row] = [(1, "name-1-é✓", 535805.5, dt.date(2028, 3, 2)), (2, None, 3.0, None), (3, "", 1e-05, None),
                        (4, " lead", -0.0, dt.date(1, 1, 1))]
    columnar, want = _texts(schema, plain, delimiter, null)
    assert columnar == want
    assert calls == ([4] if direct else [])
    quoted: list[Row] = [(1, 'say "hi"', 1.5, None), (2, "a\nb", None, None), (3, f"x{delimiter}y", 2.0, None)]
    columnar, want = _texts(schema, quoted, delimiter, null)
    assert columnar == want
    assert calls == ([4] if direct else []), "a batch with a field to quote went to pyarrow's writer"
