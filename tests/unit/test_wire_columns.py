"""The text protocol's row packets cut into Arrow binary columns by numpy (wormhole/plugins/mysql/wire_columns.py):
every length encoding, NULLs, empty values, values wider than the block gather, and malformed packets."""

from __future__ import annotations

import numpy as np
import pytest
from pymysql import err as mysql_err

from wormhole.plugins.mysql.wire_columns import (
    _INDEX_BYTES,
    binary_columns,
    check_sequence,
    packet_stops,
    pad,
)


def lenenc(value: bytes | None) -> bytes:
    if value is None:
        return b"\xfb"
    n = len(value)
    if n < 251:
        return bytes([n]) + value
    if n < 1 << 16:
        return b"\xfc" + n.to_bytes(2, "little") + value
    if n < 1 << 24:
        return b"\xfd" + n.to_bytes(3, "little") + value
    return b"\xfe" + n.to_bytes(8, "little") + value


def packets(rows: list[list[bytes | None]], first_seq: int = 0) -> tuple[bytes, np.ndarray]:
    out, starts = bytearray(), []
    for i, row in enumerate(rows):
        payload = b"".join(lenenc(v) for v in row)
        out += len(payload).to_bytes(3, "little") + bytes([(first_seq + i) & 0xFF])
        starts.append(len(out))
        out += payload
    return bytes(out), np.array(starts, np.int64)


ROWS: list[list[bytes | None]] = [
    [b"1", b"", None, b"x" * 48, b"y" * 300],
    [b"22", None, b"caf\xc3\xa9", b"z" * 47, b"w" * 70_000],
    [None, b"3", b"", b"", None],
    [b"4444", b"\t\n\\", b"\x00\xff", b"q" * 49, b""],
]


def test_columns_equal_the_values_packed_in_every_length_encoding() -> None:
    buf, starts = packets(ROWS, first_seq=250)
    columns = binary_columns(buf, starts, packet_stops(buf, starts), 5)
    assert [c.to_pylist() for c in columns] == [list(col) for col in zip(*ROWS, strict=True)]
    assert check_sequence(buf, starts, 250) == (250 + len(ROWS)) & 0xFF


def test_an_eight_byte_length_is_read() -> None:
    # The 0xFE marker (values of 16 MiB or more) on a small value: the parser reads the 8-byte length.
    payload = b"\xfe" + (3).to_bytes(8, "little") + b"abc" + lenenc(b"k")
    buf = len(payload).to_bytes(3, "little") + b"\x00" + payload
    starts = np.array([4], np.int64)
    assert [c.to_pylist() for c in binary_columns(buf, starts, packet_stops(buf, starts), 2)] == [[b"abc"], [b"k"]]


def test_a_packet_that_is_not_exactly_its_columns_is_an_error() -> None:
    buf, starts = packets([[b"a", b"b"], [b"c", b"d"]])
    with pytest.raises(mysql_err.InternalError, match="fewer than its 3 columns"):
        binary_columns(buf, starts, packet_stops(buf, starts), 3)
    with pytest.raises(mysql_err.InternalError, match="row packet of 4 bytes held 2 bytes of 1 columns"):
        binary_columns(buf, starts, packet_stops(buf, starts), 1)
    payload = lenenc(b"a") + b"\x05b"  # the second value claims 5 bytes of a packet that holds 1
    buf = len(payload).to_bytes(3, "little") + b"\x00" + payload
    starts = np.array([4], np.int64)
    with pytest.raises(mysql_err.InternalError, match="row packet of 4 bytes held 8 bytes"):
        binary_columns(buf, starts, packet_stops(buf, starts), 2)


def test_a_sequence_number_out_of_order_is_an_error() -> None:
    buf, starts = packets([[b"a"], [b"b"], [b"c"]], first_seq=7)
    with pytest.raises(mysql_err.InternalError, match="got 7, expected 6"):
        check_sequence(buf, starts, 6)


def test_values_wider_than_one_byte_index_are_gathered_piecewise_and_exact() -> None:
    # Wide values are gathered through a byte index of bounded size (_INDEX_BYTES of values at a time) and
    # a value longer than that as one slice: values on both sides of each cut, and one over it, stay exact.
    size = _INDEX_BYTES
    values = [bytes([65 + i % 26]) * n for i, n in enumerate((size // 3, size // 3, size // 3 + 5, 49, size + 7, 0,
                                                               size - 1, 1, 300))]
    rows: list[list[bytes | None]] = [[b"%d" % i, v] for i, v in enumerate(values)] + [[b"n", None]]
    buf, starts = packets(rows)
    ids, column = binary_columns(buf, starts, packet_stops(buf, starts), 2)
    assert column.to_pylist() == [*values, None] and ids.to_pylist() == [r[0] for r in rows]
    payload = bytearray(lenenc(values[4]))  # one row (a long row is a batch of its own): viewed, not copied
    size = len(payload)
    pad(payload)
    (single,) = binary_columns(payload, np.zeros(1, np.int64), np.full(1, size, np.int64), 1, padded=True)
    assert single.to_pylist() == [values[4]]
