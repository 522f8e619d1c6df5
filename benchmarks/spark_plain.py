"""The plain PySpark copy a user would write by hand: one partitioned JDBC read and one write per destination.

It is the yardstick of the Spark scenario (benchmarks/spark_scenario.py), which runs it as a child process
next to wormhole's Spark and local engines and checks every destination. It reads ``<src-db>.<table>``
from MariaDB/MySQL through the MariaDB Connector/J, partitioned on the integer key ``id`` between its MIN
and MAX, and appends the rows to each destination table (which must already exist, same schema, and is
expected to be empty) and writes them as snappy Parquet into ``--parquet`` (replaced). As a hand-written
job does, each write reads the source again (issue 37's yardstick); ``--persist`` caches the read once
(``MEMORY_AND_DISK``) and counts it before the writes instead.

Choices a user who knows Spark's JDBC source makes, and why:

* ``jdbc:mysql://...?permitMysqlScheme``: Spark picks its MySQL dialect by the ``jdbc:mysql`` prefix only,
  and Connector/J 3.x accepts that prefix only with ``permitMysqlScheme`` (2.x accepts it anyway).
* ``fetchsize``: without it the driver materialises each partition's whole result set in memory before
  the first row reaches Spark; MariaDB Connector/J streams in chunks of ``fetchsize`` rows when it is
  positive (MySQL Connector/J would need ``Integer.MIN_VALUE`` for the same effect).
* ``rewriteBatchedStatements=true`` (MariaDB Connector/J 2.x; 3.x uses ``useBulkStmts``, on by default):
  a batch of ``batchsize`` inserts goes out as multi-row INSERTs instead of one round trip per row.
* ``tinyInt1isBit=false``: the TINYINT column stays a number rather than a boolean.
* UTC everywhere (session time zone and the JVM's), so DATETIME values come back unchanged.

Run (from the repository root; the password, if any, comes from ``MYSQL_PWD``)::

    .venv/bin/python -m benchmarks.spark_plain --rows 1000000 --src-db whb_src --table t \\
        --dest-dbs whb_d1 --parquet /tmp/out/t --master 'local[2]'

The last stdout line is JSON: ``{"startup_s": ..., "read_s": ..., "write_s": ..., "rows": ...}``;
``startup_s`` is the time to build the SparkSession (JVM launch included), ``read_s`` covers the bounds
query (with ``--persist`` also the read, ``persist`` and ``count``), ``write_s`` the writes. With
``--persist``, a row count other than ``--rows`` exits 1 (without it the caller counts the copies).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

DEFAULT_JAR = "/usr/share/java/mariadb-java-client.jar"
DRIVER = "org.mariadb.jdbc.Driver"


def jdbc_url(host: str, port: int, db: str, **extra: str) -> str:
    options = {"permitMysqlScheme": "", "tinyInt1isBit": "false", **extra}
    query = "&".join(k if v == "" else f"{k}={v}" for k, v in options.items())
    return f"jdbc:mysql://{host}:{port}/{db}?{query}"


def build_session(master: str, jar: str) -> Any:
    from pyspark.sql import SparkSession

    return (SparkSession.builder
            .master(master)
            .appName("plain-jdbc-copy")
            .config("spark.jars", jar)
            .config("spark.ui.enabled", "false")
            .config("spark.sql.session.timeZone", "UTC")
            .config("spark.driver.extraJavaOptions", "-Duser.timezone=UTC")
            .getOrCreate())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, required=True, help="rows expected in the source table")
    parser.add_argument("--src-db", required=True)
    parser.add_argument("--table", required=True, help="source table, and the table name in every destination")
    parser.add_argument("--dest-dbs", nargs="*", default=[], help="MySQL destination databases")
    parser.add_argument("--parquet", help="Parquet destination directory (replaced)")
    parser.add_argument("--persist", action="store_true", help="read once: persist and count before the writes")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--num-partitions", type=int, default=4, help="read partitions on id (default 4)")
    parser.add_argument("--fetchsize", type=int, default=10_000, help="JDBC fetch size of the read (default 10000)")
    parser.add_argument("--batchsize", type=int, default=10_000, help="JDBC batch size of the writes (default 10000)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=3306)
    parser.add_argument("--user", default="root")
    parser.add_argument("--jar", default=DEFAULT_JAR, help=f"JDBC driver jar (default {DEFAULT_JAR})")
    args = parser.parse_args()
    auth = {"user": args.user, "password": os.environ.get("MYSQL_PWD", ""), "driver": DRIVER}

    start = time.perf_counter()
    spark = build_session(args.master, args.jar)
    startup_s = time.perf_counter() - start

    from pyspark import StorageLevel

    start = time.perf_counter()
    src_url = jdbc_url(args.host, args.port, args.src_db)
    bounds = (spark.read.format("jdbc").options(url=src_url, **auth)
              .option("query", f"SELECT MIN(id) AS lo, MAX(id) AS hi FROM `{args.table}`")
              .load().first())
    lo, hi = (bounds["lo"], bounds["hi"]) if bounds is not None else (None, None)
    reader = (spark.read.format("jdbc").options(url=src_url, **auth)
              .option("dbtable", f"`{args.table}`")
              .option("fetchsize", args.fetchsize)
              .option("preferTimestampNTZ", "true"))
    if lo is not None:  # an empty table has no bounds: one partition then
        reader = (reader.option("partitionColumn", "id").option("lowerBound", int(lo))
                  .option("upperBound", int(hi)).option("numPartitions", args.num_partitions))
    df = reader.load()
    rows = None
    if args.persist:
        df = df.persist(StorageLevel.MEMORY_AND_DISK)
        rows = df.count()
    read_s = time.perf_counter() - start

    start = time.perf_counter()
    if args.parquet:
        df.write.mode("overwrite").option("compression", "snappy").parquet(args.parquet)
    for db in args.dest_dbs:
        url = jdbc_url(args.host, args.port, db, rewriteBatchedStatements="true")
        df.write.jdbc(url, f"`{args.table}`", mode="append",
                      properties={**auth, "batchsize": str(args.batchsize), "isolationLevel": "READ_COMMITTED"})
    write_s = time.perf_counter() - start

    if args.persist:
        df.unpersist()
    spark.stop()
    print(json.dumps({"startup_s": round(startup_s, 3), "read_s": round(read_s, 3), "write_s": round(write_s, 3),
                      "rows": rows}), flush=True)
    if rows is not None and rows != args.rows:
        print(f"read {rows:,} rows from {args.src_db}.{args.table}, expected {args.rows:,}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
