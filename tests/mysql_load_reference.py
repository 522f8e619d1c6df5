"""The old row-by-row MySQL load encoder, kept as the tests' reference (an oracle) for the Arrow encoder."""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Sequence
from datetime import UTC, date, datetime
from itertools import repeat
from typing import Any

from wormhole.plugins.values import json_dumps

LOAD_SPECIAL = re.compile(r"[\\\t\n\r\x00]")
_LOAD_NULL = "\\N"


def load_escape(s: str) -> str:
    return s.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r") \
        .replace("\x00", "\\0")


def _utc_naive(v: datetime) -> datetime:
    # Sessions run in UTC, so an aware value is stored as the same instant.
    return v if v.tzinfo is None else v.astimezone(UTC).replace(tzinfo=None)


def _date_text(v: Any) -> str:
    return v if type(v) is str else v.isoformat()  # a zero date kept as text goes back as it came


def _datetime_text(v: Any) -> str:
    if type(v) is str:
        return v
    if type(v) is date:
        return v.isoformat()
    return _utc_naive(v).isoformat(" ")


_TZINFO = operator.attrgetter("tzinfo")


def _datetime_texts(values: Sequence[Any]) -> list[str]:
    # MySQL reads the ISO 'T' separator, so the C method serves the common case (naive datetimes);
    # aware values, dates and zero dates kept as text take the careful path.
    try:
        if any(map(_TZINFO, values)):
            return list(map(_datetime_text, values))
        return list(map(datetime.isoformat, values))
    except (TypeError, AttributeError):
        return list(map(_datetime_text, values))


def _json_text(v: Any) -> str:
    return json_dumps(v)


def _bool_text(v: Any) -> str:
    return "1" if v else "0"


def _decimal_text(values: Sequence[Any]) -> list[str]:
    texts = list(map(str, values))
    joined = "".join(texts)
    if "E" in joined:  # str() chose an exponent (1E-30); 'f' never does, and is slower: only then
        texts = list(map(format, values, repeat("f")))
        joined = "".join(texts)
    if "N" in joined or "I" in joined:  # NaN / Infinity: MySQL has no such DECIMAL
        raise ValueError(f"MySQL DECIMAL cannot hold {next(t for t in texts if 'N' in t or 'I' in t)}")
    return texts


def _float_text(values: Sequence[Any]) -> list[str]:
    texts = list(map(repr, values))  # the shortest text that reads back as the same double
    if "n" in "".join(texts):  # inf / nan (no finite repr contains an 'n')
        raise ValueError(f"MySQL cannot store the float {next(t for t in texts if 'n' in t)}")
    return texts


_TEXT: dict[str, Callable[[Any], str]] = {
    "int": int.__repr__,  # int.__repr__ writes a bool as 1/0, str() would write True
    "bool": _bool_text,
    "date": _date_text,
    "datetime": _datetime_text,
    "json": _json_text,
}


def _with_nulls(values: Sequence[Any], texts_of: Callable[[Sequence[Any]], list[str]], null: str) -> list[str]:
    """One column's values as texts: ``texts_of`` those present, ``null`` where a value is None."""
    if None not in values:
        return texts_of(values)
    it = iter(texts_of([v for v in values if v is not None]))
    return [null if v is None else next(it) for v in values]


def _load_escaped(texts: list[str]) -> list[str]:
    return list(map(load_escape, texts)) if LOAD_SPECIAL.search("".join(texts)) else texts


_LOAD_TEXTS: dict[str, Callable[[Sequence[Any]], list[str]]] = {
    "string": lambda vs: _load_escaped(list(vs)),
    "bytes": lambda vs: list(map(bytes.hex, vs)),  # loaded through UNHEX(@var)
    "decimal": _decimal_text, "float": _float_text, "datetime": _datetime_texts,
    "json": lambda vs: _load_escaped(list(map(_json_text, vs))),
}
"""Column-wise LOAD DATA texts of the logical types :data:`_TEXT` does not write value by value."""


def _load_column(logical: str, values: Sequence[Any]) -> list[str]:
    """One column as LOAD DATA fields (tab-separated, backslash-escaped, ``\\N`` for NULL)."""
    texts_of = _LOAD_TEXTS.get(logical) or (lambda vs: list(map(_TEXT[logical], vs)))
    return _with_nulls(values, texts_of, _LOAD_NULL)


def load_payload(logical_types: Sequence[str], rows: Sequence[Sequence[Any]]) -> bytes:
    """A batch as one LOAD DATA LOCAL INFILE buffer (utf-8); raises if any value cannot be encoded."""
    columns = [_load_column(t, col) for t, col in zip(logical_types, zip(*rows, strict=True), strict=True)]
    return ("\n".join(map("\t".join, zip(*columns))) + "\n").encode("utf-8")


_SQL_ESCAPES = {0: "\\0", 10: "\\n", 13: "\\r", 26: "\\Z", 34: '\\"', 39: "\\'", 92: "\\\\"}


def _sql_string(v: str) -> str:
    return "'" + v.translate(_SQL_ESCAPES) + "'"


def _quoted(texts: Sequence[str]) -> list[str]:
    return list(map(_sql_string, texts))


_SQL_TEXTS: dict[str, Callable[[Sequence[Any]], list[str]]] = {
    "string": _quoted, "bytes": lambda vs: ["X'" + v.hex() + "'" for v in vs], "decimal": _decimal_text,
    "int": lambda vs: list(map(_TEXT["int"], vs)), "bool": lambda vs: list(map(_TEXT["bool"], vs)),
    "float": _float_text, "datetime": lambda vs: _quoted(_datetime_texts(vs)),
}
"""Column-wise SQL literals; the other logical types (date, json) are their :data:`_TEXT` quoted."""


def _sql_column(logical: str, values: Sequence[Any]) -> list[str]:
    """One column as SQL literals (the session never has NO_BACKSLASH_ESCAPES)."""
    texts_of = _SQL_TEXTS.get(logical) or (lambda vs: _quoted(list(map(_TEXT[logical], vs))))
    return _with_nulls(values, texts_of, "NULL")


def sql_values(logical_types: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[str]:
    """Each row as ``(lit, lit, ...)``; raises if any value cannot be written as a literal."""
    columns = [_sql_column(t, col) for t, col in zip(logical_types, zip(*rows, strict=True), strict=True)]
    return ["(" + ",".join(r) + ")" for r in zip(*columns)]
