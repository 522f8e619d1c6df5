"""CPU of a LOAD DATA payload made from the wire text (passthrough) against the typed path (the reader's
cast to Arrow, then ``arrow_payload``), on one batch of the bench table's rows (benchmarks/mysql_scenario.py:
8 columns, ~100 bytes a row), read from the local MariaDB with the reader's own wire parse.

Run: ``.venv/bin/python -m benchmarks.mysql_passthrough [--rows 200000] [--repeat 5]``. It builds the rows
in a database of its own (``whb_passthrough``, dropped at the end), reads them once (not timed), then times
``time.process_time()`` (CPU, not wall: the machine is shared) of each path, the best of ``--repeat``.
Both payloads are loaded into a copy of the table and checksummed against the source: a fast wrong
payload has no figure.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pymysql
import pymysql.cursors

from benchmarks.mysql_scenario import FILL, SCHEMA
from wormhole.plugins.mysql.arrow_load import arrow_payload
from wormhole.plugins.mysql.arrow_read import BatchDecoder
from wormhole.plugins.mysql.protocol import column_batches
from wormhole.plugins.schema import Column

DB = "whb_passthrough"
COLUMNS = (Column("id", "int"), Column("k", "int"), Column("name", "string"),
           Column("amount", "decimal", precision=12, scale=2), Column("score", "float"),
           Column("created", "datetime"), Column("flag", "int"), Column("note", "string"))
KINDS = ("int", "int", "string", "decimal", "float", "datetime", "int", "string")


def connect(**extra: Any) -> pymysql.Connection:
    return pymysql.connect(host="127.0.0.1", user="root", password=os.environ.get("MYSQL_PWD", ""), charset="utf8mb4",
                           autocommit=True, **extra)


def best(step: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    times, out = [], None
    for _ in range(repeat):
        t0 = time.process_time()
        out = step()
        times.append(time.process_time() - t0)
    return min(times), out


def checksum_of(conn: pymysql.Connection, payload: pa.Buffer, path: str) -> int:
    with open(path, "wb") as f:
        f.write(payload.to_pybytes())
    with conn.cursor() as cur:
        cur.execute(f"TRUNCATE `{DB}`.copy")
        cur.execute(f"LOAD DATA LOCAL INFILE %s INTO TABLE `{DB}`.copy CHARACTER SET utf8mb4 FIELDS TERMINATED BY "
                    "'\\t' ESCAPED BY '\\\\' LINES TERMINATED BY '\\n'", (path,))
        cur.execute(f"CHECKSUM TABLE `{DB}`.copy")
        return int(cur.fetchone()[1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    conn = connect(local_infile=True)
    try:
        with conn.cursor() as cur:
            cur.execute("SET time_zone = '+00:00'")
            cur.execute(f"DROP DATABASE IF EXISTS `{DB}`")
            cur.execute(f"CREATE DATABASE `{DB}` CHARACTER SET utf8mb4")
            cur.execute(SCHEMA.format(db=DB, table="t"))
            cur.execute(SCHEMA.format(db=DB, table="copy"))
            cur.execute(FILL.format(db=DB, table="t", rows=args.rows))
            cur.execute(f"CHECKSUM TABLE `{DB}`.t")
            source = int(cur.fetchone()[1])
        raw = connect(database=DB)
        with raw.cursor(pymysql.cursors.SSCursor) as cur:
            cur.execute("SET time_zone = '+00:00'")
            cur.execute("SELECT * FROM t")
            ((count, wire),) = list(column_batches(cur, args.rows + 1))
        raw.close()
        decoder = BatchDecoder(COLUMNS, KINDS, "keep")

        def typed() -> pa.Buffer:
            rows, _ = decoder.decode(wire)
            return arrow_payload(rows.arrow_form)

        def typed_encode_only(batch: pa.RecordBatch) -> Callable[[], pa.Buffer]:
            return lambda: arrow_payload(batch)

        def from_wire() -> pa.Buffer:
            return arrow_payload(schema_batch, [*wire])

        cast_s, decoded = best(lambda: decoder.decode(wire)[0].arrow_form, args.repeat)
        schema_batch = decoded
        typed_s, typed_payload = best(typed, args.repeat)
        encode_s, _ = best(typed_encode_only(decoded), args.repeat)
        wire_s, wire_payload = best(from_wire, args.repeat)
        path = f"/tmp/{DB}-{os.getpid()}.tsv"
        try:
            sums = {"typed": checksum_of(conn, typed_payload, path), "wire": checksum_of(conn, wire_payload, path)}
        finally:
            if os.path.exists(path):
                os.unlink(path)
        assert sums == {"typed": source, "wire": source}, (sums, source)
        typed_buffers = {b.address for c in decoded.columns for b in c.buffers() if b is not None}
        extra = sum(b.size for w in wire for b in w.buffers() if b is not None and b.address not in typed_buffers)
        cpu = {"cast": round(cast_s, 4), "arrow_payload": round(encode_s, 4), "typed_total": round(typed_s, 4),
               "wire": round(wire_s, 4)}
        print(json.dumps({"rows": count, "typed_nbytes": decoded.nbytes, "wire_extra_nbytes": extra, "cpu_s": cpu,
                          "typed_over_wire": round(typed_s / wire_s, 2),
                          "payload_bytes": {"typed": typed_payload.size, "wire": wire_payload.size}}))
    finally:
        with conn.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS `{DB}`")
        conn.close()


if __name__ == "__main__":
    main()
