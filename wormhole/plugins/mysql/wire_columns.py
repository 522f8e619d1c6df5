"""The values of a batch of text-protocol row packets as Arrow binary columns, cut with numpy.

A row packet is its columns' values one after another, each a length-encoded string (a length byte
below 251, 251 for NULL, or 252/253/254 then a 2-, 3- or 8-byte length). The positions of every row's
values are found column by column over all rows of the batch at once, and each column's bytes are
gathered into one Arrow buffer: the work per value is done by numpy, never by a Python loop (a Python
call per value was most of a MySQL reader's CPU).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from pymysql import err as mysql_err

_GATHER_WIDTH = 48
"""Columns whose longest value is at most this many bytes are gathered as one (rows x width) block;
longer ones byte by byte (their bytes dominate, the block would be mostly padding)."""
_INDEX_BYTES = 1 << 20
"""Bytes of values gathered through one byte index (8 bytes of index per byte): a bound on that index."""


def _u(b: np.ndarray, at: np.ndarray) -> np.ndarray:
    return b[at].astype(np.int64)


def _lengths(b: np.ndarray, p: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """Each row's value at ``p``: where its bytes start, how many, and which are NULL (None: none)."""
    c = b[p]
    length = c.astype(np.int64)
    start = p + 1
    if not (c >= 251).any():
        return start, length, None
    null = c == 251
    length[null] = 0
    for marker, width in ((252, 2), (253, 3), (254, 8)):
        m = c == marker
        if m.any():
            q = p[m]
            n = np.zeros(len(q), np.int64)
            for k in range(width):
                n |= _u(b, q + 1 + k) << (8 * k)
            length[m] = n
            start[m] = q + 1 + width
    return start, length, null if null.any() else None


def _gather(b: np.ndarray, start: np.ndarray, length: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """The values' bytes, one after another. ``b`` ends with _GATHER_WIDTH bytes of padding."""
    widest = int(length.max()) if len(length) else 0
    if widest <= _GATHER_WIDTH:
        # Each value's first ``widest`` bytes as a row of a (values x widest) block (a sliding window over
        # the buffer: one index per value, not per byte), then the bytes past each value's length dropped.
        windows = np.lib.stride_tricks.sliding_window_view(b, widest) if widest else b[:0, None]
        block = windows[start] if widest else np.zeros((len(start), 0), np.uint8)
        return block[np.arange(widest) < length[:, None]]
    if len(length) == 1:  # one value (a wide row is a batch of its own): its bytes where they are, no copy
        return b[int(start[0]):int(start[0] + length[0])]
    # A byte index of 8 bytes per byte gathered: built for at most _INDEX_BYTES of values at a time, and
    # a value longer than that copied as one slice, so the index never costs more than the values do.
    out = np.empty(int(offsets[-1]), np.uint8)
    i, n = 0, len(length)
    while i < n:
        first = int(offsets[i])
        if length[i] >= _INDEX_BYTES:
            out[first:first + int(length[i])] = b[int(start[i]):int(start[i] + length[i])]
            i += 1
            continue
        j = int(np.searchsorted(offsets, first + _INDEX_BYTES, "right")) - 1  # values i..j-1 fit
        last = int(offsets[j])
        out[first:last] = b[np.repeat(start[i:j] - offsets[i:j], length[i:j]) + np.arange(first, last)]
        i = j
    return out


def pad(buf: bytearray) -> None:
    """Give ``buf`` the padding :func:`binary_columns` needs after its bytes, in place (no copy of them)."""
    buf += bytes(_GATHER_WIDTH)


def binary_columns(buf: bytes | bytearray | memoryview, starts: np.ndarray, stops: np.ndarray,
                   ncols: int, *, padded: bool = False) -> list[pa.Array]:
    """The ``ncols`` values of the row payloads ``buf[starts[i]:stops[i]]`` as one binary array per
    column (NULL where the row has NULL); an InternalError when a payload is not exactly its columns.
    ``padded``: ``buf`` ends with the padding of :func:`pad` (else its bytes are copied to pad them). A
    column of a single row views its value in ``buf``, which must then not change."""
    if padded:
        b = np.frombuffer(buf, np.uint8)
    else:
        b = np.zeros(len(buf) + _GATHER_WIDTH, np.uint8)  # every value has a full window after its start
        b[:len(buf)] = np.frombuffer(buf, np.uint8)
    try:
        return _columns(b, starts, stops, ncols)
    except IndexError as exc:  # a length that runs past the bytes read
        raise mysql_err.InternalError(f"a row packet's value runs past its end ({exc})") from exc


def _columns(b: np.ndarray, starts: np.ndarray, stops: np.ndarray, ncols: int) -> list[pa.Array]:

    rows = len(starts)
    p = starts
    out: list[pa.Array] = []
    for _ in range(ncols):
        if (p >= stops).any():
            raise mysql_err.InternalError(f"a row packet held fewer than its {ncols} columns")
        start, length, null = _lengths(b, p)
        p = start + length
        offsets = np.zeros(rows + 1, np.int64)
        np.cumsum(length, out=offsets[1:])
        data = _gather(b, start, length, offsets)
        validity = None if null is None else pa.py_buffer(np.packbits(~null, bitorder="little"))
        if offsets[-1] < 1 << 31:
            out.append(pa.Array.from_buffers(pa.binary(), rows, [validity, pa.py_buffer(offsets.astype(np.int32)),
                                                                  pa.py_buffer(data)], null_count=-1))
        else:
            large = pa.Array.from_buffers(pa.large_binary(), rows, [validity, pa.py_buffer(offsets),
                                                                     pa.py_buffer(data)], null_count=-1)
            out.append(large.cast(pa.binary()))  # fails as Arrow does past 2 GiB in one column of one batch
    bad = np.nonzero(p != stops)[0]
    if len(bad):
        r = int(bad[0])
        raise mysql_err.InternalError(f"row packet of {int(stops[r] - starts[r])} bytes held "
                                      f"{int(p[r] - starts[r])} bytes of {ncols} columns")
    return out


def packet_stops(buf: bytes | bytearray | memoryview, starts: np.ndarray) -> np.ndarray:
    """Where each row payload starting at ``starts`` ends, from its packet's 3-byte length header."""
    b = np.frombuffer(buf, np.uint8)
    return starts + (_u(b, starts - 4) | _u(b, starts - 3) << 8 | _u(b, starts - 2) << 16)


def check_sequence(buf: bytes | bytearray | memoryview, starts: np.ndarray, first: int) -> int:
    """The packets' sequence numbers must count on from ``first``: the next expected one."""
    b = np.frombuffer(buf, np.uint8)
    seqs = b[starts - 1].astype(np.int64)
    expected = (first + np.arange(len(starts))) & 0xFF
    wrong = np.nonzero(seqs != expected)[0]
    if len(wrong):
        i = int(wrong[0])
        raise mysql_err.InternalError(f"packet sequence number wrong: got {int(seqs[i])}, expected {int(expected[i])}")
    return (first + len(starts)) & 0xFF
