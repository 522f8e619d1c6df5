"""Values every store writes alike: JSON null apart from SQL NULL, decimals in plain notation, and
the Arrow form of the logical types (the file store's parquet and Spark share it, neither imports the other).

A json column's value is the parsed JSON (dict, list, str, number, bool); SQL NULL is ``None``. The
JSON literal ``null`` is :data:`JSON_NULL`, so a column holding it is not taken for a NULL column
(MySQL's ``js IS NULL`` is false for it): readers that parse JSON map ``null`` to it
(:func:`json_column`), and :func:`json_dumps` writes it back as ``null``.

JSON numbers are exact: :func:`json_parse` reads a number with a fraction or an exponent as a ``Decimal``
(an integer as an ``int``), never through a double, and :func:`json_encoder` writes a ``Decimal`` back as
its own digits, so ``0.10000000000000000001`` and ``1e400`` leave as they came (``1e400`` as ``1E+400``).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterable, Sequence
from decimal import Decimal
from itertools import chain
from types import ModuleType
from typing import Any


class JsonNull:
    """The type of :data:`JSON_NULL`: one instance, kept by pickling (Spark executors, processes)."""

    __slots__ = ()
    _instance: JsonNull | None = None

    def __new__(cls) -> JsonNull:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __reduce__(self) -> tuple[Callable[[], JsonNull], tuple[()]]:
        return JsonNull, ()

    def __repr__(self) -> str:
        return "JSON_NULL"


JSON_NULL = JsonNull()
"""The JSON literal ``null`` as a json column's value (SQL NULL stays ``None``)."""


def json_default(v: Any) -> Any:
    """``default`` of a JSON encoder: JSON_NULL is written as ``null``."""
    if v is JSON_NULL:
        return None
    raise TypeError(f"Object of type {type(v).__name__} is not JSON serializable")


_DECODE = json.JSONDecoder(parse_float=Decimal).decode


def json_parse(text: str | bytes) -> Any:
    """``json.loads`` with exact numbers: a fraction or an exponent as a ``Decimal``, not a double."""
    if not isinstance(text, str):
        text = text.decode(json.detect_encoding(text), "surrogatepass")  # what json.loads does with bytes
    return _DECODE(text)


def number_text(v: Decimal) -> str:
    """A ``Decimal`` as a JSON number, digit for digit (``str``: ``1E+400``, ``0.10000000000000000001``)."""
    if not v.is_finite():
        raise ValueError(f"Out of range float values are not JSON compliant: {v}")
    return str(v)


class _ExactEncoder:
    """A JSON encoder (``ensure_ascii=False``, NaN refused) that writes a ``Decimal`` as an exact number.

    One C encoder call per value, as before: its hook replaces each ``Decimal`` by the string ``"\u0000"``
    and keeps the decimals in order (per thread: writer threads share an encoder), and those strings are
    replaced by the numbers' digits. Should a string of the value itself be ``"\u0000"`` (more such
    strings than decimals), the value is walked in Python instead. ``default`` serves the types JSON has
    not (not ``Decimal``, which it never sees).
    """

    _MARK = '"\\u0000"'
    """How the C encoder writes the string a ``Decimal`` is replaced by (NUL: always escaped)."""

    def __init__(self, separators: tuple[str, str], default: Callable[[Any], Any], check_circular: bool) -> None:
        self._item_sep, self._key_sep = separators
        self._default = default
        self._local = threading.local()
        self._encode = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=separators,
                                        check_circular=check_circular, default=self._hook).encode
        self._leaf = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=separators,
                                      check_circular=check_circular, default=default).encode

    def _hook(self, v: Any) -> Any:
        if isinstance(v, Decimal):
            self._local.found.append(v)
            return "\x00"
        return self._default(v)

    def __call__(self, v: Any) -> str:
        found: list[Decimal] = []
        self._local.found = found
        text = self._encode(v)
        if not found:
            return text
        pieces = text.split(self._MARK)
        if len(pieces) != len(found) + 1:
            out: list[str] = []
            self._pieces(v, out)
            return "".join(out)
        numbers = list(map(str, found))
        joined = "".join(numbers)
        if "N" in joined or "I" in joined:  # NaN, sNaN, Infinity: as allow_nan=False refuses a float's
            raise ValueError(f"Out of range float values are not JSON compliant: {found}")
        numbers.append("")
        return "".join(chain.from_iterable(zip(pieces, numbers, strict=True)))

    def _pieces(self, v: Any, out: list[str]) -> None:
        fast = self._leaf
        if isinstance(v, Decimal):
            out.append(number_text(v))
        elif isinstance(v, dict):
            out.append("{")
            for i, (k, x) in enumerate(v.items()):
                if i:
                    out.append(self._item_sep)
                # keys as the encoder makes them: a str as it is, a number, bool or None as its JSON text
                out += (fast(k if isinstance(k, str) else fast(k)), self._key_sep)
                self._pieces(x, out)
            out.append("}")
        elif isinstance(v, (list, tuple)):
            out.append("[")
            for i, x in enumerate(v):
                if i:
                    out.append(self._item_sep)
                self._pieces(x, out)
            out.append("]")
        elif v is None or isinstance(v, (str, int, float)):
            out.append(fast(v))
        else:
            self._pieces(self._default(v), out)


def json_encoder(separators: tuple[str, str] = (", ", ": "), default: Callable[[Any], Any] = json_default,
                 check_circular: bool = True) -> Callable[[Any], str]:
    """A JSON encoder that writes a ``Decimal`` as an exact number (:class:`_ExactEncoder`)."""
    return _ExactEncoder(separators, default, check_circular)


json_dumps: Callable[[Any], str] = json_encoder()
"""A json column's value as its JSON text (JSON_NULL as ``null``; NaN refused; decimals digit for digit)."""


def json_loads(text: str | bytes) -> Any:
    """JSON text as a json column's value (numbers exact, :func:`json_parse`): ``null`` is JSON_NULL, not
    SQL NULL."""
    v = json_parse(text)
    return JSON_NULL if v is None else v


def from_text(parse: Callable[[str], Any], refuse: Callable[[Any], str]) -> Callable[[Any], Any]:
    """A reader's converter for a type a store keeps as text: ``parse`` a string; anything else is a
    TypeError whose message is ``refuse(value)`` (the reason the row is rejected with)."""
    def convert(v: Any) -> Any:
        if type(v) is str:
            return parse(v)
        raise TypeError(refuse(v))

    return convert


def json_column(values: Iterable[Any]) -> list[Any]:
    """Parsed JSON values of one column with ``null`` made JSON_NULL: one C-level scan when none is."""
    out = list(values)
    if None in out:
        out = [JSON_NULL if v is None else v for v in out]
    return out


def plain_decimal(v: Decimal) -> str:
    """A decimal's text without an exponent (0E-18 is 0.000000000000000000), negative zero as zero
    (MySQL and Spark have none): what every text writer writes."""
    if not v and v.is_signed():
        v = v.copy_abs()
    return format(v, "f")


def plain_decimals(values: Sequence[Any]) -> list[Any]:
    """:func:`plain_decimal` of a column (None stays None). ``str`` is faster and the same text but for
    an exponent or a negative zero: the column takes the careful path only when its text shows one."""
    present = [v for v in values if v is not None] if None in values else values
    texts = list(map(str, present))
    joined = "".join(texts)
    if "E" in joined or "-0" in joined:
        texts = list(map(plain_decimal, present))
    if len(texts) == len(values):
        return texts
    it = iter(texts)
    return [None if v is None else next(it) for v in values]


def arrow_types(pa: ModuleType) -> dict[str, Any]:
    """Logical type -> Arrow type of a parquet column: the contract Spark-written parquet shares."""
    return {
        "int": pa.int64(),
        "float": pa.float64(),
        "decimal": pa.decimal128(38, 18),
        "string": pa.string(),
        "bytes": pa.binary(),
        "bool": pa.bool_(),
        "date": pa.date32(),
        "datetime": pa.timestamp("us"),  # naive; pyarrow converts an aware value to UTC first
        "json": pa.string(),
    }


def json_text(v: Any) -> Any:
    """A json value as parquet (and Spark) hold it: its JSON text; a str is taken as text already."""
    return v if v is None or isinstance(v, str) else json_dumps(v)
