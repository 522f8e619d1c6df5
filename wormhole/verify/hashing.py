"""The hashing primitives of :mod:`wormhole.verify.checksum`: 64-bit hashes of whole columns with numpy.

Fixed-width payloads go through splitmix64's finaliser; a variable-length value's bytes are summed as
``R[position] * T[byte]`` (random 64-bit tables: no two strings collide by their structure, as they do
under a polynomial hash modulo 2**64 whatever its base), with its length, then finalised. Each domain of
canonical values has its own tag, so equal payloads of two domains hash apart.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
import pyarrow as pa

U64 = npt.NDArray[np.uint64]
MASK = 2**64 - 1


def smix(x: int) -> int:
    """splitmix64's finaliser on one Python int (for constants)."""
    x = (x + 0x9E3779B97F4A7C15) & MASK
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & MASK
    return x ^ (x >> 31)


_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)


def mix(x: U64) -> U64:
    """splitmix64's finaliser, element-wise (a new array): a bijection whose every output bit depends on
    every input bit. numpy's uint64 arithmetic wraps modulo 2**64, as the hash wants."""
    x = x + _GOLDEN
    x ^= x >> np.uint64(30)
    x *= _M1
    x ^= x >> np.uint64(27)
    x *= _M2
    x ^= x >> np.uint64(31)
    return x


_DOMAINS = ("number", "float", "string", "bytes", "bool", "date", "date_text", "datetime", "datetime_text",
            "json", "null", "seed", "length", "bytes_table", "positions")
TAG: dict[str, np.uint64] = {d: np.uint64(smix(0x5EED0000 + i)) for i, d in enumerate(_DOMAINS)}
"""A constant per domain of canonical values: equal payloads of two domains (the bytes ``5`` and the number
5) hash apart."""
NULL_HASH = np.uint64(smix(int(TAG["null"])))
"""The hash of NULL in any column."""
_LENGTH = np.uint64(smix(int(TAG["length"])) | 1)
_BYTES_TABLE: U64 = mix(np.arange(256, dtype=np.uint64) ^ TAG["bytes_table"]) | np.uint64(1)
"""T[byte]: a random odd 64-bit value per byte value."""
_CHUNK_BYTES = 1 << 16
"""Bytes of variable-length values hashed at once: their index arrays (8 bytes a byte) stay in the CPU's
cache and the allocator's pool (4 MiB chunks were 3x slower). A longer value is hashed piece by piece."""


def _weights(first: int, count: int) -> U64:
    """R[position] for positions ``first`` to ``first + count``: random 64-bit values."""
    return mix(np.arange(first, first + count, dtype=np.uint64) ^ TAG["positions"])


_POSITIONS = _weights(0, _CHUNK_BYTES)
"""R[position] of every position a value no longer than a chunk has."""


def fixed(domain: str, x: U64, y: U64 | None = None) -> U64:
    """Hashes of fixed-width payloads (one or two 64-bit words a value) of ``domain``."""
    h = mix(x ^ TAG[domain])
    if y is not None:
        h = mix(h + y)
    return h


def _long_sum(value: npt.NDArray[np.uint8]) -> int:
    """:func:`_segment_sums` of one value longer than a chunk, a chunk at a time."""
    total = 0
    for first in range(0, len(value), _CHUNK_BYTES):
        piece = value[first:first + _CHUNK_BYTES]
        terms = (_POSITIONS[:len(piece)] if first == 0 else _weights(first, len(piece))) * _BYTES_TABLE[piece]
        total = (total + int(terms.sum(dtype=np.uint64))) & MASK
    return total


def _segment_sums(offsets: npt.NDArray[np.int64], data: npt.NDArray[np.uint8]) -> U64:
    """Per value (``data[offsets[i]:offsets[i + 1]]``): the sum of ``R[position] * T[byte]`` over its bytes,
    the values of a chunk at once."""
    n = len(offsets) - 1
    sums = np.zeros(n, np.uint64)
    row = 0
    while row < n:
        base = int(offsets[row])
        if int(offsets[row + 1]) - base > _CHUNK_BYTES:
            sums[row] = _long_sum(data[base:int(offsets[row + 1])])
            row += 1
            continue
        # The values from ``row`` that end within a chunk of bytes (a longer one after them is not among them).
        stop = min(max(int(np.searchsorted(offsets, base + _CHUNK_BYTES, side="right")) - 1, row + 1), n)
        bounds = offsets[row:stop + 1]
        chunk = data[base:int(bounds[-1])]
        if len(chunk):
            starts = bounds[:-1] - base
            lengths = np.diff(bounds)
            terms = _POSITIONS[np.arange(len(chunk), dtype=np.int64) - np.repeat(starts, lengths)]
            terms *= _BYTES_TABLE[chunk]
            cumulative = np.zeros(len(chunk) + 1, np.uint64)
            np.cumsum(terms, out=cumulative[1:])
            sums[row:stop] = cumulative[starts + lengths] - cumulative[starts]
        row = stop
    return sums


def _binary_parts(arr: pa.Array) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.uint8]]:
    """The offsets (n + 1, int64) and data bytes of a string or binary array."""
    t = arr.type
    if pa.types.is_fixed_size_binary(t):
        width = t.byte_width
        buf = arr.buffers()[1]
        data = np.frombuffer(buf, np.uint8) if buf is not None else np.empty(0, np.uint8)
        offsets = np.arange(len(arr) + 1, dtype=np.int64) * width + arr.offset * width
        return offsets, data
    if pa.types.is_string_view(t) or pa.types.is_binary_view(t):
        arr = arr.cast(pa.large_binary())
        t = arr.type
    large = pa.types.is_large_string(t) or pa.types.is_large_binary(t)
    _, off_buf, data_buf = arr.buffers()[:3]
    kind = np.int64 if large else np.int32
    offsets = np.frombuffer(off_buf, kind, count=len(arr) + 1, offset=arr.offset * np.dtype(kind).itemsize)
    data = np.frombuffer(data_buf, np.uint8) if data_buf is not None else np.empty(0, np.uint8)
    return offsets.astype(np.int64), data


def variable(domain: str, arr: pa.Array) -> U64:
    """Hashes of the bytes of each value of a string or binary array (NULL rows' hashes are meaningless)."""
    offsets, data = _binary_parts(arr)
    sums = _segment_sums(offsets, data)
    lengths = np.diff(offsets).astype(np.uint64)
    return mix(mix(sums + lengths * _LENGTH) ^ TAG[domain])


def texts_hashes(domain: str, texts: Sequence[str | bytes]) -> U64:
    """:func:`variable` of Python texts (str as UTF-8, a lone surrogate passed through)."""
    raw = [t.encode("utf-8", "surrogatepass") if isinstance(t, str) else t for t in texts]
    return variable(domain, pa.array(raw, pa.large_binary()))


def nulls(arr: pa.Array) -> npt.NDArray[np.bool_] | None:
    if arr.null_count == 0:
        return None
    return np.asarray(arr.is_null().to_numpy(zero_copy_only=False), dtype=bool)


def is_text(t: pa.DataType) -> bool:
    return bool(pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t)
                or pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_binary_view(t))


def as_text(arr: pa.Array) -> pa.Array:
    """A string or binary array as large strings (binary holding text: an exact column's)."""
    return arr if pa.types.is_large_string(arr.type) else arr.cast(pa.large_string())


