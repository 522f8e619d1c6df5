"""Column-major streaming of a result set, parsed straight off the wire.

pymysql parses each row with several Python calls per value and builds a tuple per row; on a
2-core machine that alone caps a reader at ~80k rows/s. After pymysql has sent the query and read
the column definitions (an unbuffered ``SSCursor.execute``), :class:`ColumnStream` reads the row
packets of the text protocol itself, in 64 KiB chunks: one Python step per row finds the packets of a
batch, then numpy cuts their values into one Arrow binary array per column (NULL for NULL,
:mod:`wormhole.plugins.mysql.wire_columns`), with no Python per value. It hands the connection back to
pymysql in the state pymysql itself leaves it in at the end of a result set.

It relies on three pymysql internals (``_rfile``, ``_next_seq_id`` and the result's
``unbuffered_active``); when they are missing (another pymysql version) :func:`column_batches`
falls back to pymysql's own ``fetchmany``, which gives the same values, slower.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
from pymysql import err as mysql_err

from wormhole.plugins.mysql.wire_columns import binary_columns, check_sequence, packet_stops, pad

_CHUNK = 1 << 16
_LONG_CHUNK = 1 << 20
"""A long row's bytes are read off the socket this many at a time, straight onto its payload."""
_MAX_PAYLOAD = 0xFFFFFF


class ColumnStream:
    """Reads the rows of the pending unbuffered result of ``cursor`` as Arrow binary columns."""

    def __init__(self, cursor: Any) -> None:
        self._conn = cursor.connection
        self._result = cursor._result
        self._rfile = self._conn._rfile
        self._ncols = len(self._result.fields)
        self._buf = bytearray()
        self._pos = 0
        self._seq = self._conn._next_seq_id
        self.done = False
        # The rows are read here, not by pymysql: it must not try to drain them when its cursor or result
        # is collected, which after a stop mid-read can come late (at exit, the socket already closed) and
        # print "Exception ignored" tracebacks instead of JSON lines.
        self._result.unbuffered_active = False

    @staticmethod
    def usable(cursor: Any) -> bool:
        conn = getattr(cursor, "connection", None)
        result = getattr(cursor, "_result", None)
        return (conn is not None and result is not None and getattr(result, "unbuffered_active", False)
                and hasattr(conn, "_rfile") and hasattr(conn, "_next_seq_id") and bool(result.fields))

    def _more(self) -> None:
        self._buf += self._recv(self._rfile.read1, _CHUNK)  # a batch's packets stay in one buffer until cut

    def _recv(self, read: Any, size: int) -> bytes:
        try:
            chunk: bytes = read(size)
        except (OSError, ValueError) as exc:  # reset by the server, or the file closed under us
            self._finish()
            raise mysql_err.OperationalError(2013, f"Lost connection to MySQL server during query ({exc})") from exc
        if not chunk:
            self._finish()
            raise mysql_err.OperationalError(2013, "Lost connection to MySQL server during query")
        return chunk

    def _finish(self) -> None:
        self.done = True
        self._conn._next_seq_id = self._seq
        self._result.unbuffered_active = False
        self._result.rows = None

    def next_batch(self, max_rows: int, max_bytes: int = 1 << 62) -> tuple[int, list[Any]]:
        """Up to ``max_rows`` rows as ``(count, columns)``, one Arrow binary array per column, fewer
        rows once their packets reach ``max_bytes`` (wide rows: memory follows bytes, not rows); count 0
        at the end of the result."""
        if self.done:
            return 0, []
        self._buf = self._buf[self._pos:]  # a new buffer: the last batch's columns may still view the old one
        self._pos = 0
        starts: list[int] = []
        mark = starts.append
        count = size = 0
        end_of_result = False
        buf, pos, end = self._buf, 0, len(self._buf)
        # One Python step per row (the packet headers chain), on locals; numpy cuts the values afterwards.
        while count < max_rows and size < max_bytes:
            # (a long row's first packet is not waited for: its bytes go straight onto its own payload)
            if end - pos < 4 or (end - pos - 4 < (length := buf[pos] | buf[pos + 1] << 8 | buf[pos + 2] << 16)
                                 and length != _MAX_PAYLOAD):
                self._pos = pos
                self._more()
                buf, end = self._buf, len(self._buf)
                continue
            p = pos + 4
            if length == _MAX_PAYLOAD or not length or buf[p] >= 0xFE:
                self._pos = pos
                kind = self._unusual(pos, length, count)
                if kind == "long":  # a row of 16 MiB or more, in several packets: a batch of its own
                    return (1, self._long_row(pos)) if not count else (count, self._cut(starts))
                if kind == "end":
                    pos = p + length
                    end_of_result = True
                    break
            mark(p)
            pos = p + length
            size += length
            count += 1
        self._pos = pos
        columns = self._cut(starts) if count else []
        if end_of_result:
            self._seq = (self._seq + 1) & 0xFF
            self._finish()
            self._check_drained()
        return count, columns

    def _cut(self, starts: list[int]) -> list[Any]:
        """The batch's rows (their payloads start at ``starts`` in the buffer) as binary columns."""
        at = np.array(starts, np.int64)
        try:
            self._seq = check_sequence(self._buf, at, self._seq)
            return binary_columns(self._buf, at, packet_stops(self._buf, at), self._ncols)
        except mysql_err.MySQLError:
            self._finish()
            raise

    def _unusual(self, pos: int, length: int, count: int) -> str:
        """A packet that is not an ordinary row: ``long`` (the first of a row's several packets), ``end``
        (EOF, its sequence number checked), ``row``; an error packet raises the server's error."""
        buf, p = self._buf, pos + 4
        if length == _MAX_PAYLOAD:
            return "long"
        if not length:
            self._finish()
            raise mysql_err.InternalError("an empty packet in place of a row")
        if buf[p] == 0xFF:  # an error packet in place of a row (the query failed while streaming)
            self._pos = p + length
            self._finish()
            mysql_err.raise_mysql_exception(bytes(buf[p:p + length]))
        if length < 9:  # EOF: the end of the result set
            self._check_seq(buf[pos + 3], (self._seq + count) & 0xFF)
            return "end"
        return "row"

    def _check_seq(self, got: int, expected: int) -> None:
        if got != expected:
            self._finish()
            raise mysql_err.InternalError(f"packet sequence number wrong: got {got}, expected {expected}")

    def _long_row(self, pos: int) -> list[Any]:
        self._check_seq(self._buf[pos + 3], self._seq)
        self._seq = (self._seq + 1) & 0xFF
        payload, self._pos = self._long_payload(pos + 4)
        size = len(payload)
        pad(payload)
        try:
            return binary_columns(payload, np.zeros(1, np.int64), np.full(1, size, np.int64), self._ncols,
                                  padded=True)
        except mysql_err.MySQLError:
            self._finish()
            raise

    def _long_payload(self, p: int) -> tuple[bytearray, int]:
        """The row's packets' bodies from ``p`` (the first one's) as one payload, and where the
        buffer is read to: read straight onto the payload, so the row is held once, not in the buffer too."""
        payload = bytearray()
        length = _MAX_PAYLOAD
        p = self._take(payload, p, length)
        while length == _MAX_PAYLOAD:
            head = bytearray()
            p = self._take(head, p, 4)
            length = head[0] | head[1] << 8 | head[2] << 16
            self._check_seq(head[3], self._seq)
            self._seq = (self._seq + 1) & 0xFF
            p = self._take(payload, p, length)
        return payload, p

    def _take(self, out: bytearray, p: int, n: int) -> int:
        """``n`` bytes of the stream from ``p`` in the buffer onto ``out``: those in the buffer, then the
        rest off the socket (a chunk at a time, never through the buffer); where the buffer is read to."""
        have = max(min(len(self._buf) - p, n), 0)
        out += self._buf[p:p + have]
        n -= have
        while n:
            chunk = self._recv(self._rfile.read, min(n, _LONG_CHUNK))
            out += chunk
            n -= len(chunk)
        return p + have

    def _check_drained(self) -> None:
        # pymysql reads nothing past the EOF packet; neither may we, or the next command desyncs.
        if self._pos != len(self._buf):
            raise mysql_err.InternalError("data after the end of the result set")


def column_batches(cursor: Any, batch_rows: int,
                   batch_bytes: int = 1 << 62) -> Iterator[tuple[int, list[Any]]]:
    """Batches of ``(rows, columns)`` of raw values (Arrow binary arrays; lists of ``bytes`` on
    pymysql's own path) from an executed unbuffered cursor: at most
    ``batch_rows`` rows, and no more rows once their wire bytes reach ``batch_bytes``."""
    if ColumnStream.usable(cursor):
        stream = ColumnStream(cursor)
        while True:
            count, columns = stream.next_batch(batch_rows, batch_bytes)
            if count:
                yield count, columns
            if stream.done:
                return
    else:
        while True:
            rows = cursor.fetchmany(batch_rows)
            if not rows:
                return
            yield len(rows), [list(c) for c in zip(*rows, strict=True)]
