#!/usr/bin/env bash
# MariaDB Connector/J for Spark's JDBC reads and writes: Debian's libmariadb-java.
# Installed when missing and the machine can (root with apt-get); otherwise says what to do.
set -euo pipefail
JAR=/usr/share/java/mariadb-java-client.jar
if [ -f "$JAR" ]; then exit 0; fi
if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    apt-get install -y -q libmariadb-java >/dev/null 2>&1 || {
        apt-get update -q >/dev/null 2>&1 && apt-get install -y -q libmariadb-java >/dev/null
    }
    echo "installed $JAR (Debian libmariadb-java)"
else
    echo "note: $JAR is missing; install Debian's libmariadb-java (or set [spark] jars in conf/engine.toml)" \
         "for Spark's MySQL reads and writes" >&2
fi
