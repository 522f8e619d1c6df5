"""PostgreSQL to PostgreSQL without decoding (docs/manual/postgres.md): the source's binary COPY rows, read
straight from libpq (one CopyData message per row, the header on the first, the trailer its own, checked
against the server's ``COPY n``), loaded as they are by targets declaring exactly the same types."""

from __future__ import annotations

import select
import struct
from array import array
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import psycopg
from psycopg import pq
from psycopg.adapt import Transformer
from psycopg.errors import error_from_result

from wormhole.errors import ReadError
from wormhole.plugins.base import Batch, Encoding, Row, StopSignal
from wormhole.plugins.batch import EncodedRows
from wormhole.plugins.postgres.binary import HEADER, TRAILER
from wormhole.plugins.postgres.catalog import ColumnInfo
from wormhole.plugins.postgres.connection import PLUGIN_NAME
from wormhole.plugins.values import JSON_NULL, json_loads

FORMAT = "postgres.copy_binary"
PLAIN_TYPES = frozenset({"int2", "int4", "int8", "float8", "numeric", "bool", "date", "timestamp", "text",
                         "varchar", "bpchar", "bytea", "json", "jsonb", "uuid"})
"""Base types (``pg_type.typname``) whose binary form is the value alone (no element or column OIDs)."""
ENCODED_ROWS_FACTOR = 16
"""An encoded batch holds up to this many times ``batch_rows`` rows, and ``batch_bytes`` bytes."""
_SIGNATURE = HEADER[:11]
_WAIT_S = 1.0


def source_encoding(infos: Sequence[ColumnInfo], special_dates: str) -> Encoding | None:
    """The encoding a table's columns are read in undecoded, or None when some column must be read as values."""
    if not infos or any(c.base not in PLAIN_TYPES and c.element not in PLAIN_TYPES for c in infos):
        return None
    if special_dates == "null" and any(c.base in ("date", "timestamp") for c in infos):
        return None
    return Encoding(FORMAT, tuple(c.type_name for c in infos))


def takes(encoding: Encoding, target_types: Sequence[str], copy_format: str) -> bool:
    """A destination loads ``encoding`` as it is: its written columns declare exactly those types."""
    return encoding.format == FORMAT and copy_format == "auto" and tuple(target_types) == encoding.columns


class RowDecoder:
    """A binary row as values, by psycopg's binary loaders: for a row a destination refused (its dirty
    record). json and jsonb are parsed as the reader parses them; a value with no Python form (an
    ``infinity`` date) is given as PostgreSQL's name for it."""

    def __init__(self, conn: psycopg.Connection[Any], infos: Sequence[ColumnInfo]) -> None:
        types = conn.adapters.types
        self.bases = tuple(c.base for c in infos)
        self.tx = Transformer(conn)
        self.tx.set_loader_types([types[c.element].array_oid if c.element else types[c.base].oid for c in infos],
                                 pq.Format.BINARY)

    def __call__(self, rows: EncodedRows, index: int) -> Row:
        data = bytes(rows.span(index, index + 1))
        fields: list[bytes | None] = []
        at = 2
        for _ in range(struct.unpack_from(">h", data)[0]):
            size = struct.unpack_from(">i", data, at)[0]
            at += 4
            fields.append(None if size < 0 else data[at:at + size])
            at += max(size, 0)
        return tuple(self._value(i, f) for i, f in enumerate(fields))

    def _value(self, i: int, field: bytes | None) -> Any:
        if field is None:
            return None
        base = self.bases[i]
        if base in ("json", "jsonb"):
            value = json_loads(field[1:] if base == "jsonb" else field)
            return JSON_NULL if value is None else value
        row: list[bytes | None] = [None] * len(self.bases)
        row[i] = field
        try:
            value = self.tx.load_sequence(row)[i]
        except (psycopg.DataError, ValueError, OverflowError):
            return _special(base, field)
        return _uuids(value) if base in ("uuid", "_uuid") else value  # strings, as the reader gives them


def _uuids(value: Any) -> Any:
    """A uuid, or an array's (nested lists of them), as text."""
    return [_uuids(v) for v in value] if isinstance(value, list) else None if value is None else str(value)


def _special(base: str, field: bytes) -> str:
    """PostgreSQL's text of a date or timestamp Python cannot hold; another value Python has no form for as
    its type and bytes."""
    if (base, len(field)) not in (("date", 4), ("timestamp", 8)):
        return f"a {base} value Python cannot hold (binary {field.hex()})"
    value = struct.unpack(">i" if base == "date" else ">q", field)[0]
    if value == (2**31 - 1 if base == "date" else 2**63 - 1):
        return "infinity"
    if value == (-(2**31) if base == "date" else -(2**63)):
        return "-infinity"
    return f"{base} outside the years 1-9999 ({value} {'days' if base == 'date' else 'µs'} from 2000-01-01)"


def read_rows(conn: psycopg.Connection[Any], query: bytes, encoding: Encoding,
              decode: Callable[[EncodedRows, int], Row], limits: tuple[int, int], stop: StopSignal,
              split_id: str) -> Iterator[Batch]:
    """The rows ``query`` (a ``COPY ... TO STDOUT (FORMAT binary)`` with its values in it) sends, as
    batches of at most ``limits`` (rows, bytes), read straight from libpq: one call per row, no parse."""
    pg = conn.pgconn
    pg.send_query(query)
    started = _result(pg, conn, stop)
    if started.status != pq.ExecStatus.COPY_OUT:
        status = pq.ExecStatus(started.status).name
        raise ReadError(f"COPY of split {split_id} did not start (status {status})", plugin=PLUGIN_NAME)
    limit_rows, limit_bytes = limits
    buf, ends = bytearray(), array("q")
    total = 0
    first = _first_row(pg, stop, split_id)
    if first:
        buf += first
        ends.append(len(buf))
    get, append = pg.get_copy_data, ends.append
    while first is not None:
        size, data = get(1)
        if size > 0:
            # Cut before a message, never after: the last one (the trailer) stays in the batch held back.
            if len(buf) >= limit_bytes or len(ends) >= limit_rows:
                total += len(ends)
                yield Batch.of_encoded(EncodedRows(encoding, buf, ends, decode))  # handed on, never written again
                buf, ends = bytearray(), array("q")
                append = ends.append
            buf += data
            append(len(buf))
        elif not _more(pg, size, stop):
            break
    if ends and len(buf) - (ends[-2] if len(ends) > 1 else 0) == len(TRAILER) and buf.endswith(TRAILER):
        del buf[-len(TRAILER):]  # a row is never these two bytes: its field count is not -1
        ends.pop()
    _finish(pg, conn, stop, total + len(ends), split_id)
    if ends:
        yield Batch.of_encoded(EncodedRows(encoding, buf, ends, decode))


def _first_row(pg: pq.abc.PGconn, stop: StopSignal, split_id: str) -> bytes | None:
    """The first message less the header before it (the first row, the trailer, or nothing); None when
    the COPY ended without one."""
    while True:
        size, data = pg.get_copy_data(1)
        if size > 0:
            return _strip_header(bytes(data), split_id)
        if not _more(pg, size, stop):
            return None


def _more(pg: pq.abc.PGconn, size: int, stop: StopSignal) -> bool:
    """After ``get_copy_data`` gave no row: True when more may come (waited for), False at the end."""
    if size == 0:
        _wait(pg, stop)
        return True
    if size == -2:
        raise psycopg.OperationalError(f"reading COPY data failed: {pg.get_error_message()}")
    return False


def _finish(pg: pq.abc.PGconn, conn: psycopg.Connection[Any], stop: StopSignal, received: int,
            split_id: str) -> None:
    """The COPY's result: its error, or the count of rows the server sent, checked against ``received``."""
    done = _result(pg, conn, stop)
    while pg.get_result() is not None:  # the connection idle again
        pass
    if done.status != pq.ExecStatus.COMMAND_OK:
        raise error_from_result(done, encoding=conn.info.encoding)
    sent = done.command_tuples
    if sent is not None and sent != received:  # rows were not one message each: never guess
        raise ReadError(f"split {split_id}: the server sent {sent} rows, {received} were received",
                        plugin=PLUGIN_NAME)


def _strip_header(data: bytes, split_id: str) -> bytes:
    if not data.startswith(_SIGNATURE) or len(data) < len(HEADER):
        raise ReadError(f"split {split_id}: the server's binary COPY has no PGCOPY header", plugin=PLUGIN_NAME)
    extension = struct.unpack_from(">i", data, 15)[0]
    return data[len(HEADER) + extension:]


def _wait(pg: pq.abc.PGconn, stop: StopSignal) -> None:
    """Until the socket has more of the COPY (a stopping task ends the wait)."""
    while not select.select([pg.socket], [], [], _WAIT_S)[0]:
        if stop.is_set():
            raise ReadError("reading stopped", plugin=PLUGIN_NAME)
    pg.consume_input()


def _result(pg: pq.abc.PGconn, conn: psycopg.Connection[Any], stop: StopSignal) -> pq.abc.PGresult:
    while True:
        pg.consume_input()
        if not pg.is_busy():
            break
        _wait(pg, stop)
    result = pg.get_result()
    if result is None:
        raise psycopg.OperationalError("the server ended the COPY without a result")
    if result.status == pq.ExecStatus.FATAL_ERROR:
        raise error_from_result(result, encoding=conn.info.encoding)
    return result


class EncodedPiece:
    """A batch of encoded rows as a COPY binary stream; a slice of rows is a slice of the bytes."""

    binary = True

    def __init__(self, rows: EncodedRows) -> None:
        self.rows = rows

    @property
    def num_rows(self) -> int:
        return len(self.rows.ends)

    def parts(self, start: int, end: int) -> tuple[bytes | memoryview, ...]:
        """The COPY stream in three parts: the rows are not copied to put the header before them."""
        return HEADER, self.rows.span(start, end), TRAILER

    def row(self, index: int) -> Row:
        return self.rows.row(index)
