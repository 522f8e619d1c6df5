"""What ``wormhole spark pack`` puts in the archive (building one is the cluster test's: a minute)."""

from __future__ import annotations

import re

from wormhole.spark.pack import _WRAPPER, LEFT_OUT, distributions


def test_the_distributions_wormhole_needs_on_an_executor() -> None:
    names = {re.sub(r"[-_.]+", "-", d.metadata["Name"]).lower() for d in distributions()}
    # install_requires, their extras (psycopg[binary]) and the spark extra's pandas, followed through
    assert {"pyarrow", "numpy", "pymysql", "psycopg", "psycopg-binary", "structlog", "pandas",
            "python-dateutil"} <= names
    assert not names & LEFT_OUT and "wormhole" not in names  # the worker's Spark gives pyspark; wormhole as files
    assert not {"pytest", "ruff", "mypy"} & names  # test and dev tools stay behind


def test_the_python_wrapper_runs_the_interpreter_beside_it() -> None:
    script = _WRAPPER % {"version": "3.11"}
    assert script.startswith("#!/bin/sh\n") and 'PYTHONHOME="$here"' in script
    assert 'exec "$here/bin/python3.11" "$@"' in script
