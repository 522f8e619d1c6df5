"""Spark SQL text for the hive store: quoted names, literals and the column types of a created table."""

from __future__ import annotations

from typing import Any

from wormhole.plugins.base import Column

HIVE_TYPES = {"int": "BIGINT", "float": "DOUBLE", "decimal": "DECIMAL(38,18)", "string": "STRING",
              "bytes": "BINARY", "bool": "BOOLEAN", "date": "DATE", "datetime": "TIMESTAMP", "json": "STRING"}
"""The column type ``create: true`` gives each logical type (the types parquet staging holds)."""


def hive_type(column: Column) -> str:
    """A created table's column type: :data:`HIVE_TYPES`, an unsigned 64-bit int DECIMAL(20,0) (what
    Spark reads the staged uint64 as; BIGINT would refuse 2**63 and up)."""
    return "DECIMAL(20,0)" if column.unsigned and column.type == "int" else HIVE_TYPES[column.type]


def quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def table_ref(table: str) -> str:
    """``database.table`` with each part quoted."""
    return ".".join(quote(part) for part in table.split("."))


def literal(value: Any) -> str:
    """A static partition value: an integer as is, anything else as a quoted string."""
    if isinstance(value, int):
        return str(value)
    return "'" + str(value).replace("\\", "\\\\").replace("'", "\\'") + "'"


def partition_spec(partition: dict[str, Any] | None) -> str:
    """`` PARTITION (k=v, ...)`` of a static partition, or nothing."""
    if not partition:
        return ""
    return " PARTITION (" + ", ".join(f"{quote(k)}={literal(v)}" for k, v in partition.items()) + ")"
