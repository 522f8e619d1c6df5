"""Native Spark reads and writes of the built-in stores (``SourceRole.spark_read``, ``SinkRole.spark_write``).

MySQL goes over JDBC with Debian's MariaDB Connector/J: one partition per split predicate, every
shard and table its own relation, unioned by name; writes are Spark's batched JDBC inserts, one
transaction per partition, so a retried partition leaves no rows of its failed attempt. Spark 4
applies its MySQL dialect (backtick quoting) only to ``jdbc:mysql:`` URLs, hence the connector's
``permitMysqlScheme``. Parquet files are written by Spark into the file store's temporary
directory, which the periphery renames into place on commit, exactly as in local mode.
"""

from __future__ import annotations

from functools import reduce
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from wormhole.plugins.base import Schema, Split, WriteContext
from wormhole.spark.runner import canonical

MARIADB_DRIVER = "org.mariadb.jdbc.Driver"

_URL_OPTIONS = (
    "permitMysqlScheme",
    "tinyInt1isBit=false",  # TINYINT(1) is an integer, as in local mode
    "yearIsDateType=false",
    # Connector/J 2.7: multi-row INSERTs are ~2.5x faster than its bulk protocol here (make bench).
    "useBulkStmts=false",
    "rewriteBatchedStatements=true",
    "sessionVariables=time_zone='+00:00'",  # TIMESTAMP values copy unchanged, as in local mode
)


def jdbc_url(host: str, port: int, database: str) -> str:
    return f"jdbc:mysql://{host}:{port}/{database}?{'&'.join(_URL_OPTIONS)}"


def _properties(endpoint: Any) -> dict[str, str]:
    from wormhole.plugins.mysql.options import resolve_password

    return {"user": endpoint.user, "password": resolve_password(endpoint.password, endpoint.password_env),
            "driver": MARIADB_DRIVER}


def mysql_read(spark: SparkSession, options: Any, splits: list[Split], schema: Schema) -> DataFrame:
    """One JDBC relation per shard table, one partition per split, unioned by column name."""
    from wormhole.plugins.mysql.reader import endpoints

    shards = endpoints(options)
    groups: dict[tuple[int, str], list[Split]] = {}
    for split in splits:
        groups.setdefault((split.params["shard"], split.params["relation"]), []).append(split)
    frames = []
    for (shard, relation), members in groups.items():
        ep, _ = shards[shard]
        props = {**_properties(ep), "fetchsize": "10000", "preferTimestampNTZ": "true"}
        predicates = [s.params["predicate"] or "1=1" for s in members]
        frame = spark.read.jdbc(jdbc_url(ep.host, ep.port, ep.database), relation, predicates=predicates,
                                properties=props)
        columns = members[0].params.get("columns")
        if columns:
            frame = frame.select([f"`{c}`" for c in columns])
        frames.append(frame.toDF(*schema.names))  # the names the reader's schema gives (case kept)
    return reduce(lambda a, b: a.unionByName(b), frames)


def mysql_write(frame: DataFrame, options: Any, ctx: WriteContext, periphery: Any) -> bool:
    """Insert mode: Spark's batched JDBC inserts into the periphery's table (the staging table for a
    staging load). Replace and upsert need the row writer (False)."""
    if options.write_mode != "insert":
        return False
    ep = periphery.endpoint
    names = list(options.columns or ctx.schema.names)
    out = frame.toDF(*names)
    props = {**_properties(ep), "batchsize": str(options.batch_size), "isolationLevel": "READ_COMMITTED"}
    out.write.jdbc(jdbc_url(ep.host, ep.port, ep.database), periphery.table_ref(periphery.write_table),
                   mode="append", properties=props)
    return True


def file_write(frame: DataFrame, options: Any, ctx: WriteContext, periphery: Any) -> bool:
    """Parquet through Spark into the temporary directory; csv and jsonl use the row writer (False),
    so their text is the same whichever engine wrote it."""
    if options.format != "parquet":
        return False
    canonical(frame, ctx.schema).write.mode("overwrite").option("compression", "snappy").parquet(periphery.tmp_dir)
    return True
