"""DataX's postgresqlreader and postgresqlwriter as postgres sources and destinations.

They follow the mysql translators (:mod:`wormhole.importers.datax_plugins`) key for key; what differs is
PostgreSQL's: names are folded to lower case unless ``"quoted"`` (DataX sends them unquoted into its
SQL, while the postgres store quotes every name as written), a ``schema.table`` name (or the URL's
``currentSchema``) sets ``schema``, a connection's tables in several schemas become one shard per
schema, and the store connects to one server (the other hosts of a jdbcUrl list are reported).
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

from wormhole.importers.datax_parts import Params, PgServer, parse_pg_jdbc_urls, pg_name, pg_names
from wormhole.importers.datax_plugins import (
    READER_PASSWORD_ENV,
    Destination,
    Shard,
    Source,
    expand_tables,
    one_table,
    place,
    query_source,
    secret,
    table_source,
    writer_columns,
    writer_statements,
)

_READER_REASONS = {
    "session": "session statements are not run: wormhole's postgres source sets its own session",
    "fetchSize": "ignored: wormhole's postgres source streams rows with COPY TO STDOUT (no fetch size)",
}
_WRITER_REASONS = {
    "session": "session statements are not run: wormhole's postgres destination sets its own session",
    "batchByteSize": "wormhole batches by rows only (batchSize)",
}
_UPDATE = re.compile(r"update\s*(?:\((?P<keys>.*)\))?\s*", re.IGNORECASE | re.DOTALL)


def _table(c: Params, text: str) -> tuple[str | None, str]:
    """``[schema.]table`` as PostgreSQL reads it."""
    parts = pg_names(text)
    if parts is None or len(parts) > 2:
        raise c.fail("table", f"{text!r} is not a table name (table or schema.table)")
    return (parts[0], parts[1]) if len(parts) == 2 else (None, parts[0])


# ---------------------------------------------------------------------------------------------
# postgresqlreader


def _reader_shards(c: Params) -> list[Shard]:
    """A connection as shards: one per schema its tables name (the store reads one schema per
    connection entry); a querySql connection is one shard whose query runs as written."""
    server = parse_pg_jdbc_urls(c, "jdbcUrl")
    tables, queries = expand_tables(c.texts("table")), c.texts("querySql")
    c.report_rest()
    if queries:  # tables are ignored (and reported) with querySql, as DataX ignores them
        if server.schema is not None:
            c.note("jdbcUrl", "currentSchema is not applied to querySql: qualify the query's tables")
        return [Shard(replace(server, schema=None), tables, queries)]
    by_schema: dict[str | None, list[str]] = {}
    for text in tables:
        schema, table = _table(c, text)
        by_schema.setdefault(schema if schema is not None else server.schema, []).append(table)
    if not by_schema:
        return [Shard(server, [], [])]
    return [Shard(replace(server, schema=schema), names, []) for schema, names in by_schema.items()]


def postgres_reader(p: Params, channels: int | None) -> Source:
    del channels  # the split count follows settings.speed.channel, as in DataX
    params: dict[str, Any] = {"user": p.text("username", required=True)}
    secret(p, params, READER_PASSWORD_ENV)
    shards = [s for c in p.objects("connection", required=True) for s in _reader_shards(c)]
    transforms: list[dict[str, Any]] = []
    columns = None
    if any(s.queries for s in shards):
        query_source(p, shards, params)
    else:
        columns = table_source(p, shards, params, transforms, name_of=pg_name, split_name=pg_name,
                               expression_query=_expression_query)
    p.report_rest(_READER_REASONS)
    identity = {k: v for k, v in params.items() if k not in ("split_pk", "split_factor")}
    if transforms:
        identity["transforms"] = transforms
    return Source("postgres", params, columns, {"plugin": "postgres", **identity}, tuple(transforms))


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _expression_query(p: Params, shards: list[Shard], params: dict[str, Any], raw_columns: list[str],
                      where: str | None, split_pk: str | None) -> None:
    """Columns holding expressions (``now()``, ``'x'::varchar``) become one SELECT per connection."""
    targets = {(_schema(s), t) for s in shards for t in s.tables}
    if len(targets) != 1 or any(len(s.tables) != 1 for s in shards):
        raise p.fail("column", "holds expressions or constants, which wormhole reads through a query; that "
                               "needs one table (the same on every connection)")
    schema, table = targets.pop()
    source = _quote(table) if schema is None else f"{_quote(schema)}.{_quote(table)}"
    params["query"] = f"SELECT {', '.join(c.strip() for c in raw_columns)} FROM {source}" + (
        f" WHERE {where}" if where is not None else "")
    place([Shard(_without_schema(s), [], []) for s in shards], params, tables=False)
    p.note("column", "holds expressions or constants: read through a query on the table instead")
    if split_pk is not None:
        p.note("splitPk", "not used: a query is read without splitting (one split per connection)")


def _schema(shard: Shard) -> str | None:
    return shard.server.schema if isinstance(shard.server, PgServer) else None


def _without_schema(shard: Shard) -> PgServer:
    assert isinstance(shard.server, PgServer)
    return replace(shard.server, schema=None)


# ---------------------------------------------------------------------------------------------
# postgresqlwriter


def postgres_writer(p: Params, source: Source) -> Destination:
    del source
    params: dict[str, Any] = {"user": p.text("username", required=True)}
    c, table_text = one_table(p)
    server = parse_pg_jdbc_urls(c, "jdbcUrl")
    schema, table = _table(c, table_text)
    c.report_rest()
    if schema is not None:
        server = replace(server, schema=schema)
    params.update(server.params(), table=table)
    writer_columns(p, params, pg_name, "postgresqlwriter")
    params.update(_write_mode(p))
    # DataX's placeholder is replaced by the table as the job writes it: the statement means the same
    writer_statements(p, params, table_text)
    has_password = p.get("password", "") != ""  # named with its variable once the destination id is known
    p.report_rest(_WRITER_REASONS)
    return Destination("postgres", params, f"postgres_{server.database}_{table}", p if has_password else None)


def _write_mode(p: Params) -> dict[str, Any]:
    """DataX's postgresqlwriter refuses writeMode (it only INSERTs); forks take ``update (key, ...)`` as
    INSERT ... ON CONFLICT (key) DO UPDATE, which is the store's upsert, and ``copy`` as a COPY load."""
    text = p.text("writeMode")
    if text is None or text.strip().lower() == "insert":
        return {"write_mode": "insert"}
    if text.strip().lower() == "copy":
        p.note("writeMode", "copy: write_mode insert, which loads with COPY FROM STDIN")
        return {"write_mode": "insert"}
    match = _UPDATE.fullmatch(text.strip())
    if match is None:
        raise p.fail("writeMode", f"{text!r} is not insert or update (DataX's postgresqlwriter inserts only; "
                                  "update (key, ...) is INSERT ... ON CONFLICT DO UPDATE)")
    out: dict[str, Any] = {"write_mode": "upsert"}
    if match["keys"] is not None:
        keys = [pg_name(k) for k in match["keys"].split(",")]
        if not keys or None in keys:
            raise p.fail("writeMode", f"{text!r}: the conflict key must be column names")
        out["upsert_key"] = keys
    p.note("writeMode", "update is write_mode upsert (INSERT ... ON CONFLICT (upsert_key) DO UPDATE; the key is "
                        "the target's primary key unless named); Alibaba's DataX refuses writeMode here")
    return out


READERS = {"postgresqlreader": postgres_reader}
WRITERS = {"postgresqlwriter": postgres_writer}
