"""DataX readers and writers as wormhole sources and destinations.

Readers: mysqlreader (tables with column/where/splitPk, querySql, several connections = a sharded
source) and streamreader. Writers: mysqlwriter, txtfilewriter and streamwriter. Each translator reads
the plugin's ``parameter`` object through :class:`Params`, so every key it does not carry over is
reported with its path and the reason.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from wormhole.importers.datax_parts import Params, PgServer, Server, parse_jdbc_urls

_IDENTIFIER = re.compile(r"[A-Za-z0-9_$\u0080-\uffff]+")
_RANGE = re.compile(r"(\w+\.)?(\w+)\[(\d+)-(\d+)\](.*)")

READER_PASSWORD_ENV = "DATAX_READER_PASSWORD"


@dataclass(frozen=True, slots=True)
class Source:
    plugin: str
    params: dict[str, Any]
    columns: tuple[str, ...] | None
    """Column names the source yields, when known (a txtfilewriter header is checked against them)."""
    identity: dict[str, Any]
    """What makes two jobs read the same rows (``--merge``): the source without its split settings."""
    transforms: tuple[dict[str, Any], ...] = ()
    """The task's transforms: constant columns (``"1"``, ``'x'``, ``null``) derived after the read."""


@dataclass(frozen=True, slots=True)
class Destination:
    plugin: str
    params: dict[str, Any]
    id_hint: str
    """The writer type and its target, made into a destination id once all writers are known."""
    password: Params | None = None
    """The writer's parameters when they hold a password: password_env is set once the id is known."""


def plain_name(text: str) -> str | None:
    """A column or table name without backticks, or None when ``text`` is an expression or constant."""
    name = text.strip()
    if len(name) > 1 and name.startswith("`") and name.endswith("`"):
        name = name[1:-1].replace("``", "`")
        return name or None
    if _IDENTIFIER.fullmatch(name) and not name.isdigit() and name.lower() not in ("null", "true", "false"):
        return name  # NULL, TRUE and FALSE unquoted are SQL's literals, never names
    return None


def expand_tables(names: list[str]) -> list[str]:
    """DataX's table list: comma-separated names and ranges (``t_[00-31]`` is t_00..t_31, zero-padded)."""
    out = []
    for entry in names:
        for name in (n.strip() for n in entry.split(",")):
            match = _RANGE.fullmatch(name)
            if match is None:
                if name:
                    out.append(name)
                continue
            schema, base, start, end, rest = match.groups()
            low, high = sorted((int(start), int(end)))
            width = len(start) if start.startswith("0") else 0
            out.extend(f"{schema or ''}{base}{k:0{width}d}{rest.strip()}" for k in range(low, high + 1))
    return out


def secret(p: Params, params: dict[str, Any], env: str) -> None:
    """A password never goes into the task: the task names an environment variable to hold it."""
    if not p.has("password"):
        return
    if p.get("password", "") == "":
        return  # DataX connects without a password: so does the task, with no variable to set
    params["password_env"] = env
    p.note("password", f"not written to the task: set the environment variable {env} to the password "
                       f"before running it (password_env)")


# ---------------------------------------------------------------------------------------------
# readers

_MYSQL_READER_REASONS = {
    "session": "session statements are not run: wormhole's mysql source sets its own session",
    "fetchSize": "wormhole's mysql source streams rows with its own fetch size",
    "mandatoryEncoding": "wormhole reads as utf8mb4",
}


@dataclass(frozen=True, slots=True)
class Shard:
    """One connection of a reader (a postgres one: one schema of it) with its tables or queries."""

    server: Server | PgServer
    tables: list[str]
    queries: list[str]


def _reader_shard(c: Params) -> Shard:
    server = parse_jdbc_urls(c, "jdbcUrl")  # DataX's URL list: tried in order (failover_hosts)
    shard = Shard(server, expand_tables(c.texts("table")), c.texts("querySql"))
    c.report_rest()
    return shard


def mysql_reader(p: Params, channels: int | None) -> Source:
    del channels  # the split count follows settings.speed.channel, as in DataX
    params: dict[str, Any] = {"user": p.text("username", required=True)}
    secret(p, params, READER_PASSWORD_ENV)
    shards = [_reader_shard(c) for c in p.objects("connection", required=True)]
    transforms: list[dict[str, Any]] = []
    if any(s.queries for s in shards):
        query_source(p, shards, params)
        columns = None
    else:
        columns = table_source(p, shards, params, transforms, name_of=plain_name,
                               split_name=lambda text: plain_name(text) or text, expression_query=_expression_query)
    p.report_rest(_MYSQL_READER_REASONS)
    identity = {k: v for k, v in params.items() if k not in ("split_pk", "split_factor")}
    if transforms:
        identity["transforms"] = transforms
    return Source("mysql", params, columns, {"plugin": "mysql", **identity}, tuple(transforms))


def place(shards: list[Shard], params: dict[str, Any], tables: bool) -> None:
    """One connection reading one table is the flat form; anything more is ``connections``."""
    if len(shards) == 1 and (not tables or len(shards[0].tables) == 1):
        s = shards[0]
        params.update(s.server.params())
        if tables:
            params["table"] = s.tables[0]
        return
    conns = []
    for s in shards:
        conn: dict[str, Any] = s.server.params()
        if tables:
            conn["tables"] = s.tables
        conns.append(conn)
    params["connections"] = conns


def query_source(p: Params, shards: list[Shard], params: dict[str, Any]) -> None:
    queries = {q.strip() for s in shards for q in s.queries}
    if any(not s.queries for s in shards):
        raise p.fail("connection", "querySql is given on some connections only; DataX refuses that mix too")
    if len(queries) != 1 or any(len(s.queries) != 1 for s in shards):
        raise p.fail("connection", "several different querySql statements: wormhole runs one query on every "
                                   "connection; split the job, or union the queries into one statement")
    params["query"] = queries.pop()
    place(shards, params, tables=False)
    for key in ("column", "where", "splitPk"):
        if p.has(key):
            p.get(key)
            p.note(key, "ignored with querySql, as DataX ignores it")
    for i, s in enumerate(shards):
        if s.tables:
            p.note("connection", f"connection[{i}].table ignored with querySql, as DataX ignores it")


ExpressionQuery = Callable[[Params, list[Shard], dict[str, Any], list[str], str | None, str | None], None]
"""Columns holding SQL expressions, read through a query on the one table: (p, shards, params, raw columns,
where, splitPk)."""


def table_source(p: Params, shards: list[Shard], params: dict[str, Any], transforms: list[dict[str, Any]], *,
                 name_of: Callable[[str], str | None], split_name: Callable[[str], str | None],
                 expression_query: ExpressionQuery) -> tuple[str, ...] | None:
    """A reader's tables (column, where, splitPk) into ``params``; the columns the source yields, None when
    they are not known here. ``name_of`` reads a column as the database names it (None for other text: a
    constant, derived after the read, or SQL, read through ``expression_query``); ``split_name`` reads
    splitPk (None: not a column name)."""
    if any(not s.tables for s in shards):
        raise p.fail("connection", "every connection needs a table (or querySql)")
    raw_columns = p.texts("column")
    if not raw_columns:
        raise p.fail("column", "is required with table (use [\"*\"] for every column)")
    where = p.text("where")
    split_text = p.text("splitPk")
    split_pk = None if split_text is None else split_name(split_text)
    if split_text is not None and split_pk is None:
        raise p.fail("splitPk", f"{split_text!r} is not a column name")
    if raw_columns == ["*"]:
        _table_read(shards, params, None, where, split_pk)
        return None
    names = [name_of(c) for c in raw_columns]
    constants = {i: constant(c) for i, c in enumerate(raw_columns) if names[i] is None}
    if None in constants.values() or all(n is None for n in names):
        expression_query(p, shards, params, raw_columns, where, split_pk)
        return None  # read through a query: its columns are not known here, as with querySql
    _table_read(shards, params, [n for n in names if n is not None], where, split_pk)
    if constants:
        names = derive_constants(p, names, constants, transforms)
    return tuple(n for n in names if n is not None)


def _table_read(shards: list[Shard], params: dict[str, Any], columns: list[str] | None, where: str | None,
                split_pk: str | None) -> None:
    """The params of a read of the tables: their connections, the columns (None: every one), where, splitPk."""
    place(shards, params, tables=True)
    if columns is not None:
        params["columns"] = columns
    if where is not None:
        params["where"] = where
    if split_pk is not None:
        params["split_pk"] = split_pk


_NUMBER = re.compile(r"[+-]?\d{1,18}(\.\d{1,18})?")
"""A number a transform literal holds exactly (longer ones are read through a query, as MySQL reads them)."""
_STRING = re.compile(r"'(?:[^'\\]|'')*'")
"""A MySQL string literal without backslash escapes: the same text means the same in wormhole's grammar."""


def constant(text: str) -> str | None:
    """A DataX constant column as a transform expression; None for any other SQL (read through a query)."""
    value = text.strip()
    if _NUMBER.fullmatch(value):
        return value.removeprefix("+")  # the expression grammar has a unary minus only
    if _STRING.fullmatch(value):
        return value
    if value.lower() == "null":
        return "CAST(NULL AS string)"  # a column needs a type; DataX hands a null constant on as a string
    if value.lower() in ("true", "false"):
        return value.upper()
    return None


def derive_constants(p: Params, names: list[str | None], constants: dict[int, str | None],
                      transforms: list[dict[str, Any]]) -> list[str | None]:
    """Constant columns are derived after the read (``colN``, N their position), so the table keeps its
    splitPk; a ``project`` puts them back in their place when real columns follow them."""
    taken = {n.lower() for n in names if n is not None}
    out = list(names)
    derived: dict[str, str] = {}
    for i, expression in constants.items():
        name = f"col{i + 1}"
        while name.lower() in taken:
            name += "_"
        taken.add(name.lower())
        out[i] = name
        derived[name] = str(expression)
    transforms.append({"derive": derived})
    if out != [n for n in names if n is not None] + list(derived):
        transforms.append({"project": {"keep": out}})
    p.note("column", f"constants {', '.join(f'{n} = {e}' for n, e in derived.items())} are derived after the "
                     f"read (the task's transforms); the table and its splitPk are kept")
    return out


def _expression_query(p: Params, shards: list[Shard], params: dict[str, Any], raw_columns: list[str],
                      where: str | None, split_pk: str | None) -> None:
    """Columns holding expressions or constants (``now()``, ``'x'``) become one SELECT per connection."""
    tables = {t for s in shards for t in s.tables}
    if len(tables) != 1 or any(len(s.tables) != 1 for s in shards):
        raise p.fail("column", "holds expressions or constants, which wormhole reads through a query; that "
                               "needs one table (the same on every connection)")
    table = tables.pop()
    quoted = "`" + (plain_name(table) or table).replace("`", "``") + "`"
    params["query"] = f"SELECT {', '.join(c.strip() for c in raw_columns)} FROM {quoted}" + (
        f" WHERE {where}" if where is not None else "")
    place(shards, params, tables=False)
    p.note("column", "holds expressions or constants: read through a query on the table instead")
    if split_pk is not None:
        p.note("splitPk", "not used: a query is read without splitting (one split per connection)")


def stream_reader(p: Params, channels: int | None) -> Source:
    """DataX's streamreader makes ``sliceRecordCount`` rows in each of its channels."""
    count = p.integer("sliceRecordCount")
    if count is None or count < 0:
        raise p.fail("sliceRecordCount", "is required (rows per channel, 0 or more)")
    slices = channels or 1
    columns = []
    for i, c in enumerate(p.objects("column", required=True)):
        columns.append({"name": f"col{i + 1}", "type": _stream_type(c)})
        for key in ("value", "random", "dateFormat", "incr"):
            if c.has(key):
                c.get(key)
                c.note(key, "wormhole's stream source generates its own deterministic values; "
                            "this value is not reproduced")
        c.report_rest()
    params = {"rows": count * slices, "splits": slices, "columns": columns}
    p.report_rest()
    names = tuple(c["name"] for c in columns)
    return Source("stream", params, names, {"plugin": "stream", **params})


_STREAM_TYPES = {"long": "int", "int": "int", "double": "float", "string": "string", "date": "datetime",
                 "bool": "bool", "boolean": "bool", "bytes": "bytes"}


def _stream_type(c: Params) -> str:
    kind = (c.text("type") or "string").lower()
    if kind not in _STREAM_TYPES:
        raise c.fail("type", f"{kind!r} is not a streamreader type ({', '.join(sorted(_STREAM_TYPES))})")
    return _STREAM_TYPES[kind]


READERS = {"mysqlreader": mysql_reader, "streamreader": stream_reader}


# ---------------------------------------------------------------------------------------------
# writers

def one_table(p: Params) -> tuple[Params, str]:
    """A writer's one connection and the one table it names."""
    conns = p.objects("connection", required=True)
    tables = expand_tables(conns[0].texts("table"))
    if len(conns) > 1 or len(tables) != 1:
        raise p.fail("connection", "DataX spreads the rows over several tables or connections; a wormhole "
                                   "destination writes one table: give one connection and one table")
    return conns[0], tables[0]


def writer_columns(p: Params, params: dict[str, Any], name_of: Callable[[str], str | None], writer: str) -> None:
    """``column`` (every column when absent or ``*``) as the destination's columns."""
    columns = p.texts("column")
    if columns and columns != ["*"]:
        names = [name_of(col) for col in columns]
        if None in names:
            raise p.fail("column", f"{writer} columns must be column names")
        params["columns"] = names


def writer_statements(p: Params, params: dict[str, Any], table: str) -> None:
    """preSql and postSql, DataX's ``@table`` placeholder replaced by ``table``, and batchSize."""
    for key, target in (("preSql", "pre_sql"), ("postSql", "post_sql")):
        statements = [s.replace("@table", table) for s in p.texts(key)]
        if statements:
            params[target] = statements
    batch = p.integer("batchSize")
    if batch is not None and batch > 0:
        params["batch_size"] = batch


_WRITE_MODES = {"insert": "insert", "replace": "replace", "update": "upsert", "ignore": "insert"}


def mysql_writer(p: Params, source: Source) -> Destination:
    del source
    params: dict[str, Any] = {"user": p.text("username", required=True)}
    c, table_text = one_table(p)
    server = parse_jdbc_urls(c, "jdbcUrl")  # a list of URLs: tried in order (failover_hosts)
    c.report_rest()
    table = plain_name(table_text) or table_text
    params.update(server.params(), table=table)
    writer_columns(p, params, plain_name, "mysqlwriter")
    params["write_mode"] = _write_mode(p)
    writer_statements(p, params, table)
    has_password = p.get("password", "") != ""  # named with its variable once the destination id is known
    p.report_rest({"session": "session statements are not run: wormhole's mysql destination sets its own "
                              "session (strict SQL mode)",
                   "batchByteSize": "wormhole batches by rows only (batchSize)"})
    return Destination("mysql", params, f"mysql_{server.database}_{table}", p if has_password else None)


def _write_mode(p: Params) -> str:
    mode = (p.text("writeMode") or "insert").strip().lower()
    for prefix, wormhole_mode in _WRITE_MODES.items():
        if mode.startswith(prefix):
            if prefix == "ignore":
                p.note("writeMode", "INSERT IGNORE has no equivalent: write_mode insert rejects a row with a "
                                    "duplicate key to the dirty-record file instead of skipping it")
            return wormhole_mode
    raise p.fail("writeMode", f"{mode!r} is not insert, replace, update or ignore")


def txtfile_writer(p: Params, source: Source) -> Destination:
    path = p.text("path", required=True)
    assert path is not None
    params: dict[str, Any] = {"path": path, "format": "csv"}
    mode = (p.text("writeMode") or "").strip()
    if mode == "truncate":
        params["mode"] = "overwrite"
        p.note("writeMode", "truncate: mode overwrite replaces the directory at commit when it is missing, empty "
                            "or a previous wormhole output; a directory holding other files fails the "
                            "destination instead of losing only its fileName* files")
    elif mode in ("append", "nonConflict"):
        params["mode"] = "append"
        if mode == "nonConflict":
            p.note("writeMode", "nonConflict: written as mode append (existing files are kept, this run's "
                                "parts are added); wormhole does not fail when the directory holds files")
    else:
        raise p.fail("writeMode", f"{mode!r} is not truncate, append or nonConflict")
    _text_format(p, params)
    _header(p, params, source)
    p.report_rest(_TXT_REASONS)
    return Destination("file", params, f"file_{os.path.basename(path.rstrip('/')) or 'out'}")


_TXT_REASONS = {
    "fileName": "wormhole names its part files itself (part-*.csv in the directory, _SUCCESS when committed)",
    "dateFormat": "dates are written as ISO text (2024-01-31, 2024-01-31 12:00:00)",
    "compress": "wormhole writes uncompressed csv",
    "suffix": "part files end in .csv",
}


def _text_format(p: Params, params: dict[str, Any]) -> None:
    params["delimiter"] = p.get("fieldDelimiter", ",")
    null = p.get("nullFormat", "\\N")  # DataX writes NULL as \N unless told otherwise
    if not isinstance(null, str) or not isinstance(params["delimiter"], str):
        raise p.fail("nullFormat", "fieldDelimiter and nullFormat must be strings")
    params["null"] = null
    fmt = (p.text("fileFormat") or "text").lower()
    if fmt == "text":
        p.note("fileFormat", "text is written as csv: a field holding the delimiter, a double quote or a line "
                             "break is quoted (DataX's text format writes it as is)")
    elif fmt != "csv":
        raise p.fail("fileFormat", f"{fmt!r} is not csv or text")
    encoding = p.text("encoding")
    if encoding is not None and encoding.replace("-", "").lower() != "utf8":
        p.note("encoding", f"{encoding}: wormhole writes UTF-8")


def _header(p: Params, params: dict[str, Any], source: Source) -> None:
    header = p.texts("header")
    params["header"] = bool(header)
    if header and (source.columns is None or list(source.columns) != header):
        known = f" ({', '.join(source.columns)})" if source.columns else ""
        p.note("header", f"wormhole writes the source's column names{known} as the header line, not these names")


def stream_writer(p: Params, source: Source) -> Destination:
    del source
    params: dict[str, Any] = {}
    if p.get("print", True) is not False:  # DataX prints unless told not to
        params["print"] = True
    delimiter = p.get("fieldDelimiter")
    if isinstance(delimiter, str) and delimiter and delimiter != "\t":
        params["delimiter"] = delimiter
    p.report_rest({"encoding": "rows print as UTF-8"})
    return Destination("stream", params, "stream")


WRITERS = {"mysqlwriter": mysql_writer, "txtfilewriter": txtfile_writer, "streamwriter": stream_writer}
