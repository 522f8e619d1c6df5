#!/usr/bin/env bash
# mydumper/myloader, a baseline of the MySQL benchmark (benchmarks/mysql_limit.py): Debian's mydumper
# package. Benchmarks only: wormhole itself never runs it. Installed when missing and the machine can
# (root with apt-get); otherwise says so and fails, and the benchmark leaves that baseline out.
set -euo pipefail
if command -v mydumper >/dev/null 2>&1 && command -v myloader >/dev/null 2>&1; then exit 0; fi
if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    apt-get install -y -q --no-install-recommends mydumper >/dev/null 2>&1 || {
        apt-get update -q >/dev/null 2>&1 && apt-get install -y -q --no-install-recommends mydumper >/dev/null
    }
    echo "installed $(command -v mydumper) and $(command -v myloader) (Debian mydumper)"
else
    echo "mydumper is missing; install Debian's mydumper (apt-get install mydumper) to compare with it" >&2
    exit 1
fi
