"""Canonical values by domain, hashed column by column (:mod:`wormhole.verify.checksum` lists them).

Each function takes an Arrow array of one logical type and gives one 64-bit hash per value (NULL rows'
hashes are set by the caller); Python values (exact columns, text an Arrow kernel does not parse) go
through :func:`python_hashes`, which hashes each domain's payloads as the typed columns' are.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal, InvalidOperation
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from wormhole.plugins.values import JSON_NULL
from wormhole.verify.hashing import NULL_HASH, U64, as_text, fixed, is_text, nulls, texts_hashes, variable

JsonNull = Literal["value", "null"]
"""How the JSON ``null`` compares: ``value`` apart from SQL NULL, ``null`` as SQL NULL (jsonl has one null)."""


def number_text(v: int | Decimal) -> str:
    """The canonical text of an exact number (see the module's docstring)."""
    if isinstance(v, int):
        return str(v)
    if not v.is_finite():
        return "NaN" if v.is_nan() else "-Infinity" if v.is_signed() else "Infinity"
    if v.is_zero():
        return "0"
    text = format(v, "f")
    return text.rstrip("0").rstrip(".") if "." in text else text


def _number_of_text(text: str) -> str:
    """The canonical text of a number written as ``text``; the text itself when it is no number."""
    try:
        return number_text(Decimal(text.strip()))
    except (InvalidOperation, ValueError):
        return text


_PLAIN_NUMBER = r"^[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)$"
_PLAIN_STEPS: tuple[tuple[str, str], ...] = (
    (r"^\+", ""),
    (r"^(-?)0+([0-9])", r"\1\2"),
    (r"^\.", "0."),
    (r"^-\.", "-0."),
    (r"(\.[0-9]*?)0+$", r"\1"),
    (r"\.$", ""),
    (r"^-0$", "0"),
)


def canonical_number_texts(texts: pa.Array, *, arrow_decimal_scale: int | None = None) -> pa.Array:
    """Canonical texts (a string array) of the numbers ``texts`` write: plain ones by Arrow's regex
    kernels, the rest (an exponent, NaN, no number at all) value by value. ``arrow_decimal_scale``: the
    texts are Arrow's of a decimal of that scale (``-?digits[.digits]`` or an exponent form), which needs
    only its trailing zeros cut."""
    if not pa.types.is_string(texts.type) and not pa.types.is_large_string(texts.type):
        texts = texts.cast(pa.large_string())
    if arrow_decimal_scale is not None:
        odd = pc.fill_null(pc.match_substring(texts, "E"), False)
        out = texts
        if arrow_decimal_scale > 0:
            out = pc.utf8_rtrim(pc.utf8_rtrim(out, "0"), ".")
    else:
        texts = pc.utf8_trim_whitespace(texts)
        odd = pc.invert(pc.fill_null(pc.match_substring_regex(texts, _PLAIN_NUMBER), True))
        out = texts
        for pattern, replacement in _PLAIN_STEPS:
            out = pc.replace_substring_regex(out, pattern, replacement)
    if pc.any(odd).as_py():
        mask = np.asarray(odd.to_numpy(zero_copy_only=False), dtype=bool)
        fixed = [_number_of_text(t) for t in np.asarray(texts.to_pylist(), dtype=object)[mask]]
        out = pc.replace_with_mask(out, pa.array(mask), pa.array(fixed, out.type))
    return out


@functools.cache
def _int64_bounds() -> tuple[pa.Scalar, pa.Scalar]:
    """The int64 range as decimal(20, 0) scalars, made on first use: an Arrow value made while modules are
    imported has pyarrow look for pandas before the CLI hides it (arrow_for_this_process), ~40 MiB."""
    return pa.scalar(Decimal(-(2**63)), pa.decimal128(20, 0)), pa.scalar(Decimal(2**63 - 1), pa.decimal128(20, 0))


def _numbers(coefficients: npt.NDArray[np.int64], places: npt.NDArray[np.int64]) -> U64:
    """Hashes of exact numbers ``coefficient / 10**places`` in their canonical form (no trailing zero after
    the point: ``places`` as few as can be) whose coefficient fits 64 bits: by those two words, as fast
    as any fixed-width value and the same whatever Arrow type or text the number came in."""
    return fixed("number", coefficients.view(np.uint64), places.view(np.uint64))


def number_texts(canonical: pa.Array) -> U64:
    """Hashes of exact numbers by their canonical texts: those whose digits fit 64 bits by
    :func:`_numbers`, the rest by their text."""
    digits = pc.replace_substring(canonical, ".", "", max_replacements=1)
    small = pc.fill_null(pc.and_(pc.match_substring_regex(canonical, r"^-?[0-9]+(\.[0-9]+)?$"),
                                 pc.less_equal(pc.utf8_length(digits), 20)), False)
    if not pc.any(small).as_py():
        return variable("number", canonical)
    wide = digits.filter(small).cast(pa.decimal128(20, 0))
    low, high = _int64_bounds()
    fits = pc.and_(pc.greater_equal(wide, low), pc.less_equal(wide, high))
    texts = canonical.filter(small).filter(fits)
    points = np.asarray(pc.find_substring(texts, ".").to_numpy(zero_copy_only=False), np.int64)
    lengths = np.asarray(pc.utf8_length(texts).to_numpy(zero_copy_only=False), np.int64)
    exact = np.zeros(len(canonical), dtype=bool)
    exact[np.flatnonzero(np.asarray(small.to_numpy(zero_copy_only=False), dtype=bool))[
        np.asarray(fits.to_numpy(zero_copy_only=False), dtype=bool)]] = True
    hashes = np.empty(len(canonical), np.uint64)
    hashes[exact] = _numbers(np.asarray(wide.filter(fits).cast(pa.int64()).to_numpy(zero_copy_only=False), np.int64),
                             np.where(points < 0, 0, lengths - points - 1))
    if not exact.all():
        hashes[~exact] = variable("number", canonical.filter(pa.array(~exact)))
    return hashes


def _decimals_of_64_bits(arr: pa.Array) -> U64:
    """:func:`_numbers` of a decimal128 of at most 18 digits and a scale of 0 or more: its unscaled
    integers (the low word of each value is all of it) with their trailing zeros divided away."""
    scale = arr.type.scale
    words = np.frombuffer(arr.buffers()[1], np.int64, count=2 * len(arr), offset=arr.offset * 16)
    coefficients = words[0::2].copy()
    places = np.full(len(arr), scale, np.int64)
    for _ in range(scale):
        cut = (places > 0) & (coefficients % 10 == 0)
        if not cut.any():
            break
        coefficients[cut] //= 10
        places[cut] -= 1
    return _numbers(coefficients, places)


def _number(arr: pa.Array) -> U64:
    t = arr.type
    if pa.types.is_integer(t):
        none = np.zeros(len(arr), np.int64)
        if pa.types.is_unsigned_integer(t):
            values = np.asarray(arr.cast(pa.uint64()).fill_null(0).to_numpy(zero_copy_only=False), np.uint64)
            hashes = _numbers(values.astype(np.int64), none)
            big = values >= np.uint64(2**63)
            if big.any():
                hashes[big] = variable("number", arr.filter(pa.array(big)).cast(pa.string()))
            return hashes
        return _numbers(np.asarray(arr.cast(pa.int64()).fill_null(0).to_numpy(zero_copy_only=False), np.int64), none)
    if pa.types.is_decimal128(t) and t.precision <= 18 and t.scale >= 0:
        return _decimals_of_64_bits(arr)
    if pa.types.is_decimal(t):
        return number_texts(canonical_number_texts(arr.cast(pa.string()), arrow_decimal_scale=t.scale))
    if is_text(t):
        return number_texts(canonical_number_texts(as_text(arr)))
    raise TypeError(f"an exact number column cannot be read from Arrow type {t}")


_CANONICAL_NAN = np.uint64(0x7FF8000000000000)


def _float_bits(values: npt.NDArray[np.float64]) -> U64:
    values = values + 0.0  # -0.0 + 0.0 is 0.0
    bits = values.view(np.uint64).copy()
    bits[np.isnan(values)] = _CANONICAL_NAN
    return bits


def _float(arr: pa.Array) -> U64:
    t = arr.type
    if pa.types.is_floating(t) or pa.types.is_integer(t):
        values = arr.cast(pa.float64()).fill_null(0.0).to_numpy(zero_copy_only=False)
        return fixed("float", _float_bits(np.asarray(values, np.float64)))
    if is_text(t):
        try:
            return _float(as_text(arr).cast(pa.float64()))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            return python_hashes(as_text(arr).to_pylist(), "float", "value")
    raise TypeError(f"a float column cannot be read from Arrow type {t}")


_EPOCH_DAY = date(1970, 1, 1)
_EPOCH = datetime(1970, 1, 1)
_MS_PER_DAY = 86_400_000
_US_PER_UNIT = {"s": 1_000_000, "ms": 1000, "us": 1}


def _date(arr: pa.Array) -> U64:
    t = arr.type
    if pa.types.is_date32(t):
        days = np.asarray(arr.cast(pa.int32()).fill_null(0).to_numpy(zero_copy_only=False), np.int64)
        return fixed("date", days.view(np.uint64))
    if pa.types.is_date64(t):
        ms = np.asarray(arr.cast(pa.int64()).fill_null(0).to_numpy(zero_copy_only=False), np.int64)
        return fixed("date", (ms // _MS_PER_DAY).view(np.uint64))
    if is_text(t):
        try:
            return _date(as_text(arr).cast(pa.date32()))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            return python_hashes(as_text(arr).to_pylist(), "date", "value")
    raise TypeError(f"a date column cannot be read from Arrow type {t}")


def _datetime(arr: pa.Array) -> U64:
    t = arr.type
    if pa.types.is_timestamp(t):
        # The stored number is the value (UTC for an aware column, the wall clock for a naive one).
        raw = np.asarray(arr.cast(pa.int64()).fill_null(0).to_numpy(zero_copy_only=False), np.int64)
        if t.unit == "ns":
            us, rest = np.divmod(raw, 1000)
        else:
            us, rest = raw * _US_PER_UNIT[t.unit], np.zeros(len(raw), np.int64)
        return fixed("datetime", us.view(np.uint64), rest.view(np.uint64))
    if pa.types.is_date(t):
        raise TypeError(f"a datetime column cannot be read from Arrow type {t}")
    if is_text(t):
        try:  # ISO texts without a zone, by Arrow's parser; the rest (an offset, a zero datetime) by Python's
            return _datetime(as_text(arr).cast(pa.timestamp("us")))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            return python_hashes(as_text(arr).to_pylist(), "datetime", "value")
    raise TypeError(f"a datetime column cannot be read from Arrow type {t}")


_TRUE_TEXTS = frozenset({"true", "t", "1", "yes", "y", "on"})
_FALSE_TEXTS = frozenset({"false", "f", "0", "no", "n", "off"})


def _bool(arr: pa.Array) -> U64:
    t = arr.type
    if pa.types.is_boolean(t) or pa.types.is_integer(t):
        values = np.asarray(arr.cast(pa.int64()).fill_null(0).to_numpy(zero_copy_only=False), np.int64)
        if pa.types.is_integer(t) and ((values != 0) & (values != 1)).any():
            raise ValueError("a bool column read from integers holds a value other than 0 and 1")
        return fixed("bool", values.view(np.uint64))
    if is_text(t):
        return python_hashes(as_text(arr).to_pylist(), "bool", "value")
    raise TypeError(f"a bool column cannot be read from Arrow type {t}")


def json_text(v: Any) -> str:
    """The canonical text of a parsed JSON value (see the module's docstring): what :func:`_json_of_text`
    makes of its text, value for value."""
    if v is None or v is JSON_NULL:
        return "null"
    if v is True:
        return "true"
    if v is False:
        return "false"
    if isinstance(v, int | Decimal):
        return number_text(v)
    if isinstance(v, float):
        return number_text(Decimal(repr(v))) if np.isfinite(v) else json.dumps(v)
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    if isinstance(v, Mapping):
        items = sorted((str(k), x) for k, x in v.items())
        return "{" + ",".join(json.dumps(k, ensure_ascii=False) + ":" + json_text(x) for k, x in items) + "}"
    if isinstance(v, list | tuple):
        return "[" + ",".join(json_text(x) for x in v) + "]"
    return json.dumps(str(v), ensure_ascii=False)  # a date in a struct: its text


_OPEN, _CLOSE = '"\\u0000#', '#\\u0000"'
"""How json.dumps writes the marks around a number :func:`_marked_number` made a string."""


def _marked_number(text: str) -> str:
    """A JSON number with a fraction or an exponent as a string marked to be cut back to its canonical text
    once json.dumps has written the document: C's speed both ways (a string holding these marks, NUL
    characters around ``#``, would lose them too: no store writes one)."""
    if "e" in text or "E" in text:
        plain = number_text(Decimal(text))
    else:  # JSON allows no leading zeros: only the trailing ones go
        plain = text.rstrip("0").rstrip(".") if "." in text else text
        plain = "0" if plain == "-0" else plain
    return f"\x00#{plain}#\x00"


_DECODER = json.JSONDecoder(parse_float=_marked_number)
_ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)
"""Made once: json.loads and json.dumps given options make a new one each call (a third of the time).
Shared by threads as json's own default ones are."""


def _json_of_text(text: str | bytes) -> str:
    try:
        if not isinstance(text, str):
            text = text.decode(json.detect_encoding(text), "surrogatepass")  # what json.loads does with bytes
        value = _DECODER.decode(text)
    except (ValueError, UnicodeError):
        # No JSON: parquet keeps a JSON string value as its bare text.
        return json.dumps(text if isinstance(text, str) else text.decode("utf-8", "surrogateescape"),
                          ensure_ascii=False)
    out: str = _ENCODER.encode(value)
    return out.replace(_OPEN, "").replace(_CLOSE, "") if _OPEN in out else out


def _json(arr: pa.Array, json_null: JsonNull) -> U64:
    if not is_text(arr.type):  # lists, structs, maps: their Python values
        return _json_texts([None if v is None else json_text(v) for v in arr.to_pylist()], json_null)
    # Each distinct document parsed once (a column repeats its documents more often than not).
    encoded = arr.dictionary_encode()
    distinct = _json_texts([None if v is None else _json_of_text(v) for v in encoded.dictionary.to_pylist()],
                           json_null)
    if not len(distinct):
        return np.full(len(arr), NULL_HASH, np.uint64)
    hashes = distinct[np.asarray(encoded.indices.fill_null(0).to_numpy(zero_copy_only=False), np.int64)]
    missing = nulls(encoded.indices)
    if missing is not None:
        hashes[missing] = NULL_HASH
    return hashes


def _json_texts(texts: Sequence[str | None], json_null: JsonNull) -> U64:
    present = [t if t is not None else "" for t in texts]
    hashes = texts_hashes("json", present)
    for i, t in enumerate(texts):
        if t is None or (json_null == "null" and t == "null"):
            hashes[i] = NULL_HASH
    return hashes


# -- values given as Python objects (exact columns, text an Arrow kernel did not parse) --------------

def _canonical(v: Any, kind: str) -> tuple[str, Any]:
    """(domain, payload) of one non-NULL Python value of a column of logical type ``kind``."""
    if v is JSON_NULL or kind == "json":
        if isinstance(v, str | bytes):
            return "json", _json_of_text(v)
        return "json", json_text(v)
    if isinstance(v, bool):
        return "bool", int(v)
    if isinstance(v, int | Decimal):
        return "number", number_text(v)
    if isinstance(v, float):
        return "float", v
    if isinstance(v, datetime):
        if v.tzinfo is not None:
            v = v.astimezone(UTC).replace(tzinfo=None)
        return "datetime", (v - _EPOCH) // timedelta(microseconds=1)
    if isinstance(v, date):
        return "date", (v - _EPOCH_DAY).days
    if isinstance(v, bytes | bytearray | memoryview):
        return ("string" if kind == "string" else "bytes"), bytes(v)
    if isinstance(v, str):
        return _canonical_text(v, kind)
    return "json", json_text(v)


def _canonical_text(text: str, kind: str) -> tuple[str, Any]:
    """(domain, payload) of a value of a column of logical type ``kind`` written as ``text``."""
    if kind in ("int", "decimal"):
        return "number", _number_of_text(text)
    if kind == "float":
        try:
            return "float", float(text)
        except ValueError:
            return "string", text
    if kind == "date":
        try:
            return _canonical(date.fromisoformat(text.strip()), kind)
        except ValueError:
            return "date_text", text
    if kind == "datetime":
        try:
            return _canonical(datetime.fromisoformat(text.strip()), kind)
        except ValueError:
            return "datetime_text", text
    if kind == "bool":
        folded = text.strip().lower()
        if folded in _TRUE_TEXTS or folded in _FALSE_TEXTS:
            return "bool", int(folded in _TRUE_TEXTS)
        return "string", text
    if kind == "bytes":
        return "bytes", text.encode("utf-8", "surrogatepass")
    return "string", text


def python_hashes(values: Sequence[Any], kind: str, json_null: JsonNull) -> U64:
    """Hashes of Python values of a column of logical type ``kind``, grouped by domain so each domain's
    hashes are made as the typed columns' are."""
    hashes = np.full(len(values), NULL_HASH, np.uint64)
    groups: dict[str, tuple[list[int], list[Any]]] = {}
    for i, v in enumerate(values):
        if v is None:
            continue
        domain, payload = _canonical(v, kind)
        if domain == "json" and json_null == "null" and payload == "null":
            continue
        rows, payloads = groups.setdefault(domain, ([], []))
        rows.append(i)
        payloads.append(payload)
    for domain, (rows, payloads) in groups.items():
        hashes[rows] = _payload_hashes(domain, payloads)
    return hashes


def _payload_hashes(domain: str, payloads: list[Any]) -> U64:
    if domain == "number":
        return number_texts(pa.array(payloads, pa.large_string()))
    if domain == "float":
        return fixed("float", _float_bits(np.array(payloads, np.float64)))
    if domain in ("bool", "date"):
        return fixed(domain, np.array(payloads, np.int64).view(np.uint64))
    if domain == "datetime":
        return fixed(domain, np.array(payloads, np.int64).view(np.uint64), np.zeros(len(payloads), np.uint64))
    return texts_hashes(domain, payloads)


def _string(arr: pa.Array) -> U64:
    if not is_text(arr.type) and not pa.types.is_fixed_size_binary(arr.type):
        raise TypeError(f"a string column cannot be read from Arrow type {arr.type}")
    return variable("string", arr)


def _bytes(arr: pa.Array) -> U64:
    if not is_text(arr.type) and not pa.types.is_fixed_size_binary(arr.type):
        raise TypeError(f"a bytes column cannot be read from Arrow type {arr.type}")
    return variable("bytes", arr)


_BY_KIND: dict[str, Callable[[pa.Array], U64]] = {
    "int": _number, "decimal": _number, "float": _float, "string": _string, "bytes": _bytes, "bool": _bool,
    "date": _date, "datetime": _datetime}
"""The hashes of a column of each logical type but json, NULL rows' left to the caller."""


def array_hashes(arr: pa.Array, kind: str, json_null: JsonNull) -> U64:
    """Hashes of the values of a column of logical type ``kind`` in its Arrow form (NULL: NULL_HASH)."""
    t = arr.type
    if pa.types.is_null(t):
        return np.full(len(arr), NULL_HASH, np.uint64)
    if pa.types.is_dictionary(t):
        values = array_hashes(arr.dictionary, kind, json_null)
        indices = np.asarray(arr.indices.fill_null(0).to_numpy(zero_copy_only=False), np.int64)
        hashes = values[indices] if len(values) else np.full(len(arr), NULL_HASH, np.uint64)
        missing = nulls(arr.indices)
    elif kind == "json":
        return _json(arr, json_null)
    elif kind in _BY_KIND:
        hashes = _BY_KIND[kind](arr)
        missing = nulls(arr)
    else:
        raise TypeError(f"unknown logical type {kind!r}")
    if missing is not None:
        hashes[missing] = NULL_HASH
    return hashes
