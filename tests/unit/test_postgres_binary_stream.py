"""The COPY binary stream the postgres destination makes: its framing, NULLs, jsonb's version byte, numeric's
groups, and a sliced batch encoded as a fresh one (the server side is tests/integration/test_postgres_binary.py)."""

from __future__ import annotations

import struct
from decimal import Decimal

import pyarrow as pa
import pytest

from wormhole.plugins.postgres.binary import HEADER, NotBinary, binary_kinds, binary_rows


def test_framing_nulls_and_jsonb() -> None:
    batch = pa.record_batch({"i": pa.array([1, None], pa.int64()), "j": pa.array(['{"a":1}', None])})
    stream, offsets = binary_rows(batch, ["int2", "jsonb"])
    assert stream[:len(HEADER)].tobytes() == b"PGCOPY\n\xff\r\n\x00" + bytes(8) and len(HEADER) == 19
    assert stream[-2:].tobytes() == b"\xff\xff" and offsets[-1] == len(stream) - 2
    first = stream[offsets[0]:offsets[1]].tobytes()
    assert first == struct.pack(">hih", 2, 2, 1) + struct.pack(">i", 8) + b'\x01{"a":1}'
    assert stream[offsets[1]:offsets[2]].tobytes() == struct.pack(">hii", 2, -1, -1)


def test_numeric_groups_and_a_sliced_batch() -> None:
    values = pa.array([Decimal("0"), Decimal("-12345.67"), None, Decimal("1.50")], pa.decimal128(9, 2))
    stream, offsets = binary_rows(pa.record_batch({"n": values}), ["numeric"])
    row = stream[offsets[1]:offsets[2]].tobytes()
    # 9 digits at scale 2: two integer groups (0001 2345) and one fraction group (.6700), weight 1, negative
    assert row == struct.pack(">hi", 1, 14) + struct.pack(">hhhh", 3, 1, 0x4000, 2) + struct.pack(">hhh", 1, 2345, 6700)
    sliced, sliced_offsets = binary_rows(pa.record_batch({"n": values.slice(1, 3)}), ["numeric"])
    assert sliced[sliced_offsets[0]:].tobytes() == stream[offsets[1]:].tobytes()


def test_what_has_no_binary_form() -> None:
    assert binary_kinds(["int", "string"], ["int8", "uuid"]) is None
    assert binary_kinds(["int", "float"], ["int4", "float4"]) is None
    assert binary_kinds(["int", "json"], ["int4", "jsonb"]) == ("int4", "jsonb")
    with pytest.raises(NotBinary):
        binary_rows(pa.record_batch({"i": pa.array([40000], pa.int64())}), ["int2"])
    with pytest.raises(NotBinary):
        binary_rows(pa.record_batch({"n": pa.array([Decimal(1)], pa.decimal128(19, 0))}), ["numeric"])
    with pytest.raises(NotBinary):
        binary_rows(pa.record_batch({"t": pa.array([1], pa.timestamp("ns"))}), ["timestamp"])
