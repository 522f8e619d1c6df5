#!/usr/bin/env bash
# The PostgreSQL JDBC driver (pgjdbc) for Spark's JDBC reads and writes of the postgres store:
# Debian's libpostgresql-jdbc-java. Installed when missing and the machine can (root with apt-get);
# otherwise says what to do.
set -euo pipefail
JAR=/usr/share/java/postgresql.jar
if [ -f "$JAR" ]; then exit 0; fi
if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    apt-get install -y -q libpostgresql-jdbc-java >/dev/null 2>&1 || {
        apt-get update -q >/dev/null 2>&1 && apt-get install -y -q libpostgresql-jdbc-java >/dev/null
    }
    echo "installed $JAR (Debian libpostgresql-jdbc-java)"
else
    echo "note: $JAR is missing; install Debian's libpostgresql-jdbc-java (or set [spark] jars in" \
         "conf/engine.toml) for Spark's PostgreSQL reads and writes" >&2
fi
