"""Two stores' rows compared to the key (``wormhole diff``; issue 39, item 5).

Each side is a source spec (``{"plugin": ..., "params": ...}``: a table, a query, files) read through its store's
own splitter and readers, split by split on a few threads, as a task would read it. Every row is reduced to two
64-bit hashes of the canonical values (:mod:`wormhole.verify.checksum`): its key's and its compared columns'. Only
those hashes are kept (16 bytes a row), so the comparison of the two hash sets finds, in one pass over each side,
every key missing from the right, extra in it, held with different values, or held more than once. A second pass
over both sides, only when something differs, fetches the values of the first differing keys to show them. Without a
key the rows are compared as multisets: a row is missing or extra, never different.

Why not data-diff's bisection (checksums of key segments computed in each database, recursing into the segments that
differ): it saves moving rows when both databases can compute the same checksum of the same values, which across
stores of other types they cannot (MySQL's DECIMAL and PostgreSQL's numeric text, a DATETIME and a timestamptz,
parquet's decimal(38,18)); wormhole's readers move rows at the speed a copy does, and the canonical hash is computed
on the batches they give.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import date, datetime, time
from decimal import Decimal
from typing import Any

import numpy as np
import pyarrow as pa

from wormhole.errors import InvalidTaskConfig, WormholeError
from wormhole.options import Problems, parse_options
from wormhole.plugins import registry
from wormhole.plugins.arrow_form import rows_from_arrow
from wormhole.plugins.base import ReadContext, Rejected, Split
from wormhole.plugins.batch import Batch
from wormhole.plugins.schema import Schema
from wormhole.task_spec import SourceSpec
from wormhole.verify.by_plan import by_split, outside_splits, report
from wormhole.verify.checksum import Digest, JsonNull, row_hashes
from wormhole.verify.window import RowRange, narrowed

SAMPLES = 20
"""Differences shown with their values, by default."""
SHOWN_CHARS = 120
"""A text value longer than this is shown cut, with its length (a value is for a person to recognise)."""


class Stopped(WormholeError):
    """The comparison's stop event was set (a signal, in the CLI) before it ended: its reads stopped at their
    next batch, and nothing was compared."""


@dataclass(frozen=True, slots=True)
class Side:
    """One side of a comparison: what a person calls it, and the source that reads it."""

    label: str
    source: SourceSpec
    shown: str
    """The store and what it reads, without credentials (``mysql shop.orders``)."""
    params: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)
    """The params as given (the primary key is looked up from them)."""
    rows: RowRange | None = None
    """Only the rows inside this range are compared (an incremental task's windows); None: every row."""
    narrow: bool = False  # rows also narrow the read (window.narrowed): a source's cursor has the window's type

    def primary_key(self) -> tuple[str, ...]:
        """The table's primary key, when the side is one table of a store with a catalog (mysql, postgres,
        sqlite); () otherwise (a query, files, a table without one)."""
        role = registry.source(self.source.plugin)
        table = self.params.get("table")
        if role.catalog is None or not isinstance(table, str) or self.params.get("query") is not None:
            return ()
        named = {k: v for k, v in self.params.items() if k not in ("table", "split_pk", "columns", "where")}
        options = parse_options(role.options, {**named, "tables": [table]}, self.label, Problems())
        patterns = role.catalog.patterns(options) if options is not None else None
        if options is None or patterns is None:
            return ()
        catalog = role.catalog.open(options)
        try:
            try:
                selected = patterns.select(catalog.list_tables(patterns))
            except InvalidTaskConfig:  # a view (the catalog lists base tables only): no primary key
                return ()
            listed = [t for t in selected if t.ref.name == table]
            return catalog.describe(listed[0].ref).primary_key if len(listed) == 1 else ()
        finally:
            catalog.close()


@dataclass(frozen=True, slots=True)
class Columns:
    """The compared columns, each side's own spelling of each, in the left side's order."""

    left: tuple[str, ...]
    right: tuple[str, ...]
    key_left: tuple[str, ...]
    key_right: tuple[str, ...]
    only_left: tuple[str, ...] = ()
    only_right: tuple[str, ...] = ()
    logical_left: Mapping[str, str] = field(default_factory=dict)
    """Each compared column's logical type, the left side's: both sides' values are read as it (a sqlite or
    csv copy holds a decimal or a timestamp as text, which compares as the number or time it spells)."""
    logical_right: Mapping[str, str] = field(default_factory=dict)
    """The same types under the right side's names."""


@dataclass(slots=True)
class Hashes:
    """A side's rows as hashes: each row's key hash and the hash of its compared columns."""

    keys: np.ndarray
    rows: np.ndarray
    splits: np.ndarray | None = None
    """Each row's split, as its index in the splits read (None: not kept)."""
    rejected: int = 0
    """Rows the side's reader could not decode (a reader's dirty rows): the comparison fails on them."""

    @property
    def count(self) -> int:
        return int(self.rows.size)

    def digest(self) -> str:
        """The side's order-independent digest: rows and the sum of row hashes (mod 2**64), as text."""
        return str(Digest.of(self.rows))


@dataclass(frozen=True, slots=True)
class Difference:
    kind: str
    """``missing`` (on the left, not the right), ``extra`` (on the right only), ``different``, ``duplicate``
    (the key more than once on a side)."""
    key_hash: int
    left: tuple[Mapping[str, Any], ...] = ()
    right: tuple[Mapping[str, Any], ...] = ()

    def to_dict(self, key: Sequence[str], compared: Sequence[str]) -> dict[str, Any]:
        first = self.left[0] if self.left else self.right[0] if self.right else {}
        out: dict[str, Any] = {"kind": self.kind, "key": {k: first.get(k) for k in key} if key else None}
        if self.kind == "different" and self.left and self.right:
            out["columns"] = [c for c in compared if self.left[0].get(c) != self.right[0].get(c)]
        out["left"] = list(self.left)
        out["right"] = list(self.right)
        return out


@dataclass(frozen=True, slots=True)
class Comparison:
    left: Side
    right: Side
    columns: Columns
    left_rows: int
    right_rows: int
    left_digest: str
    right_digest: str
    counts: Mapping[str, int]
    """Per kind of difference, how many keys (rows, without a key)."""
    samples: tuple[Difference, ...] = field(default=())
    found: Mapping[str, np.ndarray] = field(default_factory=dict, compare=False, repr=False)
    """Every difference's key hash (row hash, without a key), per kind: what a repair looks the keys up by."""
    splits: Mapping[str, Any] | None = None
    """When the left side was read by given splits (a task's last plan): ``read`` (how many), ``outside`` (the
    left side's rows no split of the plan reads, read beside them: ``rows``, and a ``sample`` difference among
    them) and ``differing`` (split id -> how many keys of each kind: the keys the left side holds, so ``extra``
    keys, which only the right side holds, belong to no split and are counted under ``""``; those of rows
    outside the plan's splits under :data:`~wormhole.verify.by_plan.OUTSIDE`)."""
    window: Mapping[str, Any] | None = None
    """An incremental task's: the range of the cursor column compared, the runs that delivered it, and
    ``moved_later``, the keys the destination holds whose source row has moved past the range since."""

    @property
    def equal(self) -> bool:
        return not any(self.counts.values())

    def to_dict(self) -> dict[str, Any]:
        cols = self.columns
        return {
            "equal": self.equal,
            "left": {"source": self.left.shown, "rows": self.left_rows, "digest": self.left_digest},
            "right": {"source": self.right.shown, "rows": self.right_rows, "digest": self.right_digest},
            "key": list(cols.key_left) or None,
            "columns": list(cols.left),
            **({"only_left": list(cols.only_left)} if cols.only_left else {}),
            **({"only_right": list(cols.only_right)} if cols.only_right else {}),
            "differences": dict(self.counts),
            "samples": [d.to_dict(cols.key_left, cols.left) for d in self.samples],
            **({"splits": dict(self.splits)} if self.splits is not None else {}),
            **({"window": dict(self.window)} if self.window is not None else {}),
        }


# -- the sides ----------------------------------------------------------------------------------------


def parse_side(raw: Any, label: str) -> Side:
    """A side's source spec, checked as a task's source is; InvalidTaskConfig naming ``label.…``."""
    problems = Problems()
    if not isinstance(raw, dict) or not isinstance(raw.get("plugin"), str):
        raise InvalidTaskConfig([f"{label}: expected an object with a plugin and its params, "
                                 f"like a task's source ({{\"plugin\": \"mysql\", \"params\": {{...}}}})"])
    unknown = sorted(set(raw) - {"plugin", "params"})
    if unknown:
        problems.add(label, f"unknown key(s) {', '.join(unknown)} (a side has plugin and params)")
    plugin = registry.get(raw["plugin"]) if raw["plugin"] in registry.names() else None
    if plugin is None or plugin.source is None:
        problems.add(f"{label}.plugin", f"{raw['plugin']!r} is not a store wormhole reads (stores: "
                                        f"{', '.join(n for n in registry.names() if registry.get(n).source)})")
        raise InvalidTaskConfig(problems.items)
    params = raw.get("params", {})
    options = parse_options(plugin.source.options, params, f"{label}.params", problems)
    if problems or options is None:
        raise InvalidTaskConfig(problems.items)
    if isinstance(params, dict) and params.get("tables") is not None:
        raise InvalidTaskConfig([f"{label}.params.tables: a side is one table, query or set of files"])
    return Side(label, SourceSpec(plugin=raw["plugin"], options=options), _shown(raw["plugin"], params), params)


def _shown(plugin: str, params: Mapping[str, Any]) -> str:
    what = [str(params[k]) for k in ("database", "schema", "table", "path") if isinstance(params.get(k), str)]
    if not what and isinstance(params.get("query"), str):
        what = [f"query {params['query'][:60]!r}"]
    return f"{plugin} {'.'.join(what)}".strip()


class _Rejections:
    """A side's reader's dirty rows: counted (the comparison cannot vouch for rows it could not read)."""

    def __init__(self) -> None:
        self.count = 0
        self.first: str | None = None
        self._lock = threading.Lock()

    def reject(self, origin: str, rows: Sequence[Rejected], split_id: str | None = None) -> None:
        with self._lock:
            self.count += len(rows)
            if rows and self.first is None:
                self.first = str(rows[0].reason)


def _context(side: Side, stop: threading.Event, dirty: _Rejections, batch_rows: int) -> ReadContext:
    return ReadContext(task_id=0, run_id=0, batch_rows=batch_rows, dirty=dirty, plugin=side.source.plugin,
                       stop=stop)


def _schema_and_splits(side: Side, ctx: ReadContext, readers: int,
                       given: Sequence[Split] | None = None) -> tuple[Schema, list[Split]]:
    """The side's schema and its splits: ``given`` (a task's plan), else as its splitter cuts it."""
    role = registry.source(side.source.plugin)
    options = narrowed(side.source, side.rows if side.narrow else None)
    schema = role.reader(options, ctx).schema()
    return schema, list(given) if given is not None else role.splitter(options, ctx).split(readers)


def _batches(side: Side, ctx: ReadContext, schema: Schema, split: Split) -> Iterator[pa.RecordBatch]:
    reader = registry.source(side.source.plugin).reader(narrowed(side.source, side.rows if side.narrow else None), ctx)
    for item in reader.read(split):
        if ctx.stop.is_set():  # between two batches: a read stops within one batch of its stop
            raise Stopped(f"the read of the {side.label} side ({side.shown}) was stopped")
        batch = item if isinstance(item, Batch) else Batch.of_rows(item, schema)
        if not batch.num_rows:
            continue
        form = batch.arrow_form
        if side.rows is not None:
            form = form.filter(side.rows.mask(form, f"{side.label} side ({side.shown})"))
        if form.num_rows:
            yield form


def _each_split(side: Side, ctx: ReadContext, schema: Schema, splits: Sequence[Split], readers: int,
                work: Callable[[pa.RecordBatch], Any]) -> list[list[Any]]:
    """``work`` on every batch of every split, ``readers`` splits at a time; per split, its results."""
    def one(split: Split) -> list[Any]:
        if ctx.stop.is_set():
            raise Stopped(f"the read of the {side.label} side ({side.shown}) was stopped")
        return [work(b) for b in _batches(side, ctx, schema, split)]

    with ThreadPoolExecutor(max_workers=max(1, min(readers, len(splits))), thread_name_prefix="diff") as pool:
        return list(pool.map(one, splits))


# -- columns ------------------------------------------------------------------------------------------


def _column_problems(names: Mapping[str, Mapping[str, str]], key: Sequence[str], ignore: Sequence[str],
                     any_common: bool) -> list[str]:
    problems = [f"--key: {k} is not a column of the {side} side ({', '.join(found.values()) or 'no columns'})"
                for k in key for side, found in names.items() if k.lower() not in found]
    problems += [f"--ignore: {n} is a column of neither side" for n in ignore
                 if all(n.lower() not in found for found in names.values())]
    if not any_common and not problems:
        problems.append("no column to compare: the sides have no column name in common"
                        + (" once --ignore's are left out" if ignore else ""))
    return problems


def pick_columns(left: Schema, right: Schema, key: Sequence[str], ignore: Sequence[str]) -> Columns:
    """The columns both sides have (names compared without case), less ``ignore``; the key's on each side.
    InvalidTaskConfig when a key column is missing on a side, or no column is left to compare."""
    names = {"left": {c.name.lower(): c.name for c in left.columns},
             "right": {c.name.lower(): c.name for c in right.columns}}
    skip = {n.lower() for n in ignore}
    common = [c.name for c in left.columns if c.name.lower() in names["right"] and c.name.lower() not in skip]
    problems = _column_problems(names, key, ignore, bool(common))
    if problems:
        raise InvalidTaskConfig(problems)

    def only(side: str, other: str) -> tuple[str, ...]:
        return tuple(n for low, n in names[side].items() if low not in names[other] and low not in skip)

    types = {c.name: c.type for c in left.columns}
    right_of = names["right"]
    return Columns(
        left=tuple(common), right=tuple(right_of[n.lower()] for n in common),
        key_left=tuple(names["left"][k.lower()] for k in key), key_right=tuple(right_of[k.lower()] for k in key),
        only_left=only("left", "right"), only_right=only("right", "left"),
        logical_left={n: types[n] for n in common}, logical_right={right_of[n.lower()]: types[n] for n in common})


# -- comparing ----------------------------------------------------------------------------------------


def json_null_of(left: Side, right: Side) -> JsonNull:
    """A jsonl side has one null: the JSON ``null`` and SQL NULL are one value on both sides then."""
    def jsonl(side: Side) -> bool:
        return side.source.plugin == "file" and getattr(side.source.options, "format", None) == "jsonl"

    return "null" if jsonl(left) or jsonl(right) else "value"


def _hashed(side: Side, batch: pa.RecordBatch, columns: Sequence[str], logical: Mapping[str, str],
            json_null: JsonNull) -> np.ndarray:
    """``row_hashes``; a column whose values cannot be read as the compared type is named (exit 204)."""
    try:
        return row_hashes(batch, columns, logical=logical, json_null=json_null)
    except TypeError:
        for name in columns:
            try:
                row_hashes(batch, [name], logical=logical, json_null=json_null)
            except TypeError as exc:
                raise InvalidTaskConfig([f"the {side.label} side's column {name} cannot be compared as "
                                         f"{logical.get(name, 'its type')}: {exc} (leave it out: --ignore {name})"]
                                        ) from None
        raise


def _hashes(side: Side, ctx: ReadContext, schema: Schema, splits: Sequence[Split], readers: int,
            key: Sequence[str], compared: Sequence[str], logical: Mapping[str, str], json_null: JsonNull) -> Hashes:
    def work(batch: pa.RecordBatch) -> tuple[np.ndarray, np.ndarray]:
        rows = _hashed(side, batch, compared, logical, json_null)
        return (_hashed(side, batch, key, logical, json_null) if key else rows), rows

    per_split = _each_split(side, ctx, schema, splits, readers, work)
    parts = [pair for split in per_split for pair in split]
    if not parts:
        return Hashes(np.empty(0, np.uint64), np.empty(0, np.uint64), np.empty(0, np.int32))
    where = np.concatenate([np.full(len(p[1]), i, np.int32) for i, split in enumerate(per_split) for p in split])
    return Hashes(np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts]), where)


def differences(left: Hashes, right: Hashes, keyed: bool) -> dict[str, np.ndarray]:
    """The key hashes of each kind of difference (row hashes, when the sides have no key: ``missing`` and
    ``extra`` then, one entry per surplus copy of a row)."""
    lk, lc = np.unique(left.keys, return_counts=True)
    rk, rc = np.unique(right.keys, return_counts=True)
    if not keyed:
        both, li, ri = np.intersect1d(lk, rk, assume_unique=True, return_indices=True)
        surplus = lc[li].astype(np.int64) - rc[ri].astype(np.int64)
        missing = np.concatenate([np.setdiff1d(lk, rk, assume_unique=True), np.repeat(both, np.maximum(surplus, 0))])
        extra = np.concatenate([np.setdiff1d(rk, lk, assume_unique=True), np.repeat(both, np.maximum(-surplus, 0))])
        return {"missing": missing, "extra": extra}
    duplicate = np.union1d(lk[lc > 1], rk[rc > 1])
    missing = np.setdiff1d(np.setdiff1d(lk, rk, assume_unique=True), duplicate, assume_unique=True)
    extra = np.setdiff1d(np.setdiff1d(rk, lk, assume_unique=True), duplicate, assume_unique=True)
    single_l, single_r = lk[lc == 1], rk[rc == 1]
    both, _, _ = np.intersect1d(single_l, single_r, assume_unique=True, return_indices=True)
    lo, ro = np.argsort(left.keys, kind="stable"), np.argsort(right.keys, kind="stable")
    lrow = left.rows[lo[np.searchsorted(left.keys[lo], both)]]
    rrow = right.rows[ro[np.searchsorted(right.keys[ro], both)]]
    return {"missing": missing, "extra": extra, "different": both[lrow != rrow], "duplicate": duplicate}


def compare(left: Side, right: Side, *, key: Sequence[str] | None = None, ignore: Sequence[str] = (),
            readers: int = 4, samples: int = SAMPLES, batch_rows: int = 10_000,
            stop: threading.Event | None = None, left_splits: Sequence[Split] | None = None) -> Comparison:
    """Compare the rows of two sides (see the module's docstring). ``key`` None: the left side's primary key,
    else the right side's, else none. ``left_splits``: read the left side by these splits (a task's last plan)
    and say which of them hold differing keys; the rows none of them reads (the source's now, beyond the ranges
    the plan was cut from) are read too, and their differences counted as
    :data:`~wormhole.verify.by_plan.OUTSIDE` them. Raises InvalidTaskConfig for a key or columns that do not fit
    the sides, and the store's own errors when a side cannot be read."""
    stop = stop or threading.Event()
    if key is None:
        key = left.primary_key() or right.primary_key()
    dirty = {left.label: _Rejections(), right.label: _Rejections()}
    ctx = {s.label: _context(s, stop, dirty[s.label], batch_rows) for s in (left, right)}
    lschema, lsplits = _schema_and_splits(left, ctx[left.label], readers, left_splits)
    if left_splits is not None:  # the plan's ranges were the source's then: its rows now are read whole
        lsplits += outside_splits(left.source, ctx[left.label], left_splits, readers)
    rschema, rsplits = _schema_and_splits(right, ctx[right.label], readers)
    cols = pick_columns(lschema, rschema, key, ignore)
    nulls = json_null_of(left, right)
    with ThreadPoolExecutor(max_workers=2, thread_name_prefix="diff-side") as sides:  # both read at once
        lf = sides.submit(_hashes, left, ctx[left.label], lschema, lsplits, readers, cols.key_left, cols.left,
                          cols.logical_left, nulls)
        rf = sides.submit(_hashes, right, ctx[right.label], rschema, rsplits, readers, cols.key_right, cols.right,
                          cols.logical_right, nulls)
        try:
            lh, rh = lf.result(), rf.result()
        except BaseException:
            stop.set()  # the other side's reads end at their next retry wait
            raise
    for side in (left, right):
        bad = dirty[side.label]
        if bad.count:
            raise ValueError(f"the {side.label} side ({side.shown}) has {bad.count} row(s) its reader could not "
                             f"decode (the first: {bad.first}): they cannot be compared")
    found = differences(lh, rh, keyed=bool(key))
    counts = {kind: int(hashes.size) for kind, hashes in found.items()}
    planned = None if left_splits is None else len(left_splits)
    where = lh.splits if lh.splits is not None else np.empty(0, np.int32)
    differing, beyond = ({}, None) if planned is None else by_split(lh.keys if key else lh.rows, where, found,
                                                                    lsplits, planned)
    shown: tuple[Difference, ...] = ()
    sample = None
    if samples and any(counts.values()):
        shown, sample = _samples(_Read(left, ctx[left.label], lschema, lsplits),
                                 _Read(right, ctx[right.label], rschema, rsplits), cols, nulls, found, samples,
                                 beyond, readers)
    return Comparison(left, right, cols, lh.count, rh.count, lh.digest(), rh.digest(), counts, shown, found,
                      None if planned is None else report(where, planned, differing, sample))


@dataclass(frozen=True, slots=True)
class _Read:
    """A side as it is read: its context, schema and splits."""

    side: Side
    ctx: ReadContext
    schema: Schema
    splits: Sequence[Split]


def _samples(left: _Read, right: _Read, cols: Columns, nulls: JsonNull, found: Mapping[str, np.ndarray], samples: int,
           beyond: tuple[str, int] | None, readers: int) -> tuple[tuple[Difference, ...], dict[str, Any] | None]:
    """The first ``samples`` differences of each kind with both sides' rows of them (the values fetched by a
    second read of each side), and the first of the rows outside a plan's splits (``beyond``), if any."""
    wanted = {kind: hashes[:samples] for kind, hashes in found.items()}
    extra = [beyond[1]] if beyond else []  # the first difference outside the plan's splits, shown with it
    picked = np.unique(np.concatenate([*wanted.values(), np.array(extra, np.uint64)]))
    rows = (_fetch(left.side, left.ctx, left.schema, left.splits, readers, cols.key_left or cols.left, cols.left,
                   cols.logical_left, nulls, picked),
            _fetch(right.side, right.ctx, right.schema, right.splits, readers, cols.key_right or cols.right,
                   cols.right, cols.logical_right, nulls, picked, rename=dict(zip(cols.right, cols.left, strict=True))))

    def one(kind: str, key_hash: int) -> Difference:
        return Difference(kind, key_hash, tuple(rows[0].get(key_hash, ())), tuple(rows[1].get(key_hash, ())))

    shown = tuple(one(kind, int(h)) for kind, hashes in wanted.items() for h in hashes)[:samples]
    return shown, one(*beyond).to_dict(cols.key_left, cols.left) if beyond else None


def _fetch(side: Side, ctx: ReadContext, schema: Schema, splits: Sequence[Split], readers: int,
           key: Sequence[str], compared: Sequence[str], logical: Mapping[str, str], json_null: JsonNull,
           wanted: np.ndarray, rename: Mapping[str, str] | None = None) -> dict[int, list[dict[str, Any]]]:
    """The rows of ``side`` whose key hash is in ``wanted`` (sorted), by key hash, as the values shown."""
    names = list(compared)
    shown_as = [rename.get(n, n) if rename else n for n in names]

    def work(batch: pa.RecordBatch) -> list[tuple[int, dict[str, Any]]]:
        hashes = row_hashes(batch, key, logical=logical, json_null=json_null)
        mask = np.isin(hashes, wanted)
        if not mask.any():
            return []
        picked = batch.filter(pa.array(mask)).select(names)
        return [(int(h), {n: show(v) for n, v in zip(shown_as, row, strict=True)})
                for h, row in zip(hashes[mask], rows_from_arrow(picked), strict=True)]

    out: dict[int, list[dict[str, Any]]] = {}
    for split in _each_split(side, ctx, schema, splits, readers, work):
        for found in split:
            for h, row in found:
                out.setdefault(h, []).append(row)
    return out


def show(value: Any) -> Any:
    """A value as JSON can carry it for a person: binary as hex (cut), long text cut with its length, exact
    numbers and times as text."""
    if isinstance(value, bytes | bytearray | memoryview):
        data = bytes(value)
        text = data[: SHOWN_CHARS // 2].hex()
        return f"0x{text}" + (f"... ({len(data)} bytes)" if len(data) > SHOWN_CHARS // 2 else "")
    if isinstance(value, str):
        return value if len(value) <= SHOWN_CHARS else f"{value[:SHOWN_CHARS]}... ({len(value)} chars)"
    if isinstance(value, Decimal | datetime | date | time):
        return str(value)
    if isinstance(value, float) and value != value:
        return "NaN"
    return value
