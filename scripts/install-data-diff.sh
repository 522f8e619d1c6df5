#!/usr/bin/env bash
# data-diff 0.11 (datafold's, archived in 2024), a baseline of the comparison benchmark
# (benchmarks/verify_diff.py). Benchmarks only: wormhole never runs it. It goes in a virtualenv of its
# own (var/bench-venvs/data-diff): its pins (pydantic 1, urllib3 1, dbt-core 1.x) conflict with wormhole's.
# Its dbt dependency would build a parser wheel fetched from GitHub (unreachable from CI machines), so
# data-diff goes in without dependencies and the ones it imports are pinned here, as measured to work.
set -euo pipefail
VENV=${DATA_DIFF_VENV:-var/bench-venvs/data-diff}
if [ -x "$VENV/bin/data-diff" ] && "$VENV/bin/data-diff" --version >/dev/null 2>&1; then exit 0; fi
python3 -m venv "$VENV"
"$VENV/bin/pip" install --quiet --upgrade pip
"$VENV/bin/pip" install --quiet --no-deps "data-diff==0.11.2"
"$VENV/bin/pip" install --quiet "attrs" "click<9" "dsnparse==0.1.15" "keyring" "mashumaro[msgpack]==3.10" \
    "pydantic==1.10.27" "rich" "tabulate" "toml" "typing_extensions" "urllib3==1.26.20" "packaging" "requests" \
    "PyYAML" "dbt-core==1.7.20" "mysql-connector-python" "psycopg2-binary"
"$VENV/bin/data-diff" --version
