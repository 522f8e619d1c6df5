#!/usr/bin/env bash
# A standalone Spark cluster on this machine: one master (spark://127.0.0.1:7077) and one worker,
# started from the PySpark installed in .venv (pip's PySpark has bin/spark-class, not sbin/).
#
#   scripts/spark-cluster.sh start    # then set [spark] master = "spark://127.0.0.1:7077"
#   scripts/spark-cluster.sh stop
#   scripts/spark-cluster.sh status
#
# Environment: SPARK_MASTER_PORT (7077), SPARK_WORKER_CORES (2), SPARK_WORKER_MEMORY (2g),
# WORMHOLE_CLUSTER_DIR (var/spark-cluster: pid files, logs, the worker's scratch space).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-.venv/bin/python}
PORT=${SPARK_MASTER_PORT:-7077}
DIR=${WORMHOLE_CLUSTER_DIR:-var/spark-cluster}
MASTER_URL="spark://127.0.0.1:$PORT"
SPARK_HOME=$("$PYTHON" -c 'import os, pyspark; print(os.path.dirname(pyspark.__file__))')
export SPARK_HOME SPARK_LOCAL_IP=127.0.0.1 SPARK_NO_DAEMONIZE=1
# Executors run the driver's interpreter, so they import the same pyspark, pyarrow and wormhole.
export PYSPARK_PYTHON=${PYSPARK_PYTHON:-$(cd "$(dirname "$PYTHON")" && pwd)/$(basename "$PYTHON")}

running() { [ -f "$DIR/$1.pid" ] && kill -0 "$(cat "$DIR/$1.pid")" 2>/dev/null; }

port_open() {
    "$PYTHON" - "$1" <<'PY' 2>/dev/null
import socket, sys
socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=0.5).close()
PY
}

wait_port() {  # $1 port, $2 what
    for _ in $(seq 1 120); do
        if port_open "$1"; then return 0; fi
        sleep 0.5
    done
    echo "spark-cluster: $2 did not open port $1; see $DIR/*.log" >&2
    return 1
}

start() {
    mkdir -p "$DIR/work"
    if ! running master; then
        if port_open "$PORT"; then
            echo "spark-cluster: port $PORT is taken by another process (another cluster?)" >&2
            return 1
        fi
        nohup "$SPARK_HOME/bin/spark-class" org.apache.spark.deploy.master.Master \
            --host 127.0.0.1 --port "$PORT" --webui-port "${SPARK_MASTER_WEBUI_PORT:-8080}" \
            >"$DIR/master.log" 2>&1 &
        echo $! >"$DIR/master.pid"
        wait_port "$PORT" master
    fi
    if ! running worker; then
        nohup "$SPARK_HOME/bin/spark-class" org.apache.spark.deploy.worker.Worker \
            --host 127.0.0.1 --cores "${SPARK_WORKER_CORES:-2}" --memory "${SPARK_WORKER_MEMORY:-2g}" \
            --work-dir "$(cd "$DIR/work" && pwd)" --webui-port "${SPARK_WORKER_WEBUI_PORT:-8081}" "$MASTER_URL" \
            >"$DIR/worker.log" 2>&1 &
        echo $! >"$DIR/worker.pid"
    fi
    # The worker is usable once the master has registered it.
    for _ in $(seq 1 120); do
        if grep -q "Successfully registered with master" "$DIR/worker.log" 2>/dev/null; then
            echo "spark-cluster: master $MASTER_URL with one worker is up"
            return 0
        fi
        sleep 0.5
    done
    echo "spark-cluster: the worker did not register; see $DIR/worker.log" >&2
    return 1
}

stop() {
    for role in worker master; do
        if running "$role"; then
            kill "$(cat "$DIR/$role.pid")" 2>/dev/null || true
            for _ in $(seq 1 40); do running "$role" || break; sleep 0.25; done
            if running "$role"; then kill -9 "$(cat "$DIR/$role.pid")" 2>/dev/null || true; fi
        fi
        rm -f "$DIR/$role.pid"
    done
    echo "spark-cluster: stopped"
}

case "${1:-}" in
    start) start ;;
    stop) stop ;;
    status) for r in master worker; do if running $r; then echo "$r: running"; else echo "$r: stopped"; fi; done ;;
    *) echo "usage: $0 start|stop|status" >&2; exit 2 ;;
esac
