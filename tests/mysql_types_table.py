"""The awkward-types MySQL table: 33 columns, every integer width at its limits (unsigned too),
DECIMAL(65,30), emoji and control characters, a 70,000-character MEDIUMTEXT, every byte value, zero and
partial-zero dates, TIME at +-838 h, YEAR 1901/2155/0, BIT(10) = 1023, JSON, and a row of NULLs.

Shared by the mysql store's round-trip test (tests/integration/test_mysql_store.py) and the Spark
type-equality test (tests/spark/test_spark_types.py), so both engines are held to the same rows.
"""

from __future__ import annotations

from typing import Any

TYPES_DDL = """CREATE TABLE `{name}` (
  id INT PRIMARY KEY,
  ti TINYINT, tu TINYINT UNSIGNED, si SMALLINT, su SMALLINT UNSIGNED, mi MEDIUMINT, mu MEDIUMINT UNSIGNED,
  i INT, iu INT UNSIGNED, bi BIGINT, bu BIGINT UNSIGNED,
  dec65 DECIMAL(65,30), d2 DECIMAL(10,2), fl FLOAT, db DOUBLE,
  c CHAR(10), vc VARCHAR(300), tx TEXT, mt MEDIUMTEXT,
  bn BINARY(4), vb VARBINARY(300), bl BLOB,
  dt DATE, dtm DATETIME(6), dt0 DATETIME, ts TIMESTAMP(3) NULL, tm TIME(6), yr YEAR,
  js JSON, en ENUM('a','b','c'), st SET('x','y','z'), bt BIT(10), b1 BIT(1)
) CHARACTER SET utf8mb4"""

TYPE_ROWS: list[tuple[Any, ...]] = [
    (1, 127, 255, 32767, 65535, 8388607, 16777215, 2147483647, 4294967295, 9223372036854775807,
     18446744073709551615, "99999999999999999999999999999999999.999999999999999999999999999999", "12345678.90",
     1.5, 1.7976931348623157e308, "abc", "😀🎉 ünïcödé 𝄞", "tab\there\nnew\\back \x00nul 'q' \"dq\" \\N",
     "x" * 70000, b"\x00\x01\xff\x00", bytes(range(256))[:300], b"\t\n\\N\x00", "2024-02-29",
     "2024-01-02 03:04:05.123456", "9999-12-31 23:59:59", "2038-01-19 03:14:07.999", "838:59:59.000000", 2155,
     '{"a": [1, 2.5, "x😀", 12345678901234567890], "b": null, "c": {"d": true}}', "c", "x,z", 1023, 1),
    (2, -128, 0, -32768, 0, -8388608, 0, -2147483648, 0, -9223372036854775808, 0,
     "-99999999999999999999999999999999999.999999999999999999999999999999", "-0.01",
     -1.5, -2.2250738585072014e-308, "", "", "", "", b"\x00\x00\x00\x00", b"", b"", "1000-01-01",
     "1000-01-01 00:00:00.000000", "1000-01-01 00:00:00", "1970-01-01 00:00:01.000", "-838:59:59.000000", 1901,
     "[]", "a", "", 0, 0),
    (3, *([None] * 32)),
    (4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, "0.000000000000000000000000000001", "0.00", 0.0, 0.1, " pad", "a\rb", "\\",
     "", b"ab\x00\x00", b"\xf0\x9f\x98", b"\xff" * 1000, "0000-00-00", "0000-00-00 00:00:00.000000",
     "2024-00-10 00:00:00", None, "00:00:00.000001", 0, '"just a string"', "b", "x,y,z", 512, 1),
]

TYPE_COLUMNS: list[str] = ["id", "ti", "tu", "si", "su", "mi", "mu", "i", "iu", "bi", "bu", "dec65", "d2", "fl", "db",
                           "c", "vc", "tx", "mt", "bn", "vb", "bl", "dt", "dtm", "dt0", "ts", "tm", "yr", "js", "en",
                           "st", "bt", "b1"]
"""The columns of TYPES_DDL in order."""
