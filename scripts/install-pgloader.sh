#!/usr/bin/env bash
# pgloader, the baseline of the MySQL -> PostgreSQL benchmark (benchmarks/postgres_scenario.py):
# Debian's pgloader. Benchmarks only: wormhole itself never runs it. Installed when missing and the
# machine can (root with apt-get); otherwise says what to do and fails, as the benchmark cannot run.
set -euo pipefail
if command -v pgloader >/dev/null 2>&1; then exit 0; fi
if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    apt-get install -y -q --no-install-recommends pgloader >/dev/null 2>&1 || {
        apt-get update -q >/dev/null 2>&1 && apt-get install -y -q --no-install-recommends pgloader >/dev/null
    }
    echo "installed $(command -v pgloader) (Debian pgloader)"
else
    echo "pgloader is missing; install Debian's pgloader (apt-get install pgloader) to run the PostgreSQL" \
         "benchmark" >&2
    exit 1
fi
