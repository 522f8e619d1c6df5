"""Every operator on every store, local mode: the task's transforms (filter, filter, project, derive) on each
source store, then three destinations on the mysql, csv and parquet stores with their own operators (filter,
rename, mask partial; project, mask hash, filter, cast), each equal to its expected output computed
independently. Push-down applies to the sqlite and mysql sources (static), the rest run in wormhole."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import Workspace, make_workspace
from tests.mysql_helpers import Databases
from tests.transform_helpers import SALT, SALT_ENV, source_rows, task
from tests.transform_stores import (
    SOURCE_STORES,
    check_store_destinations,
    expected_filtered,
    make_source,
    store_destinations,
)

pytestmark = pytest.mark.mysql


@pytest.fixture
def ws(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Workspace:
    monkeypatch.setenv(SALT_ENV, SALT)
    return make_workspace(tmp_path)


@pytest.mark.parametrize("store", SOURCE_STORES)
def test_each_operator_from_each_source_store_into_mysql_csv_and_parquet(ws: Workspace, dbs: Databases,
                                                                         store: str) -> None:
    rows = source_rows()
    db = dbs.create("tdst")
    spec = task(make_source(store, rows, ws.root, dbs), store_destinations(ws.root / "out", dbs.server, db),
                engine="local")
    task_id = ws.submit(spec)
    proc = ws.run("--task-id", str(task_id))
    assert proc.returncode == 0, proc.stderr[-3000:]
    check_store_destinations(rows, ws.root / "out", dbs.server, db)
    result = ws.show(task_id)["result"]
    pushed = result["plan"]["transforms"].get("source_query")
    assert (pushed is not None) == (store in ("sqlite", "mysql")), result["plan"]["transforms"]
    assert {d: v["rows_filtered"] for d, v in result["destinations"].items()} == expected_filtered(rows)
