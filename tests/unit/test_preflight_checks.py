"""The executor check's parts that need no Spark: the JDBC driver classes a jar declares, where the probe
files go, and how the executors' reports become problems naming the executor and the setting."""

from __future__ import annotations

from pathlib import Path

import pytest

import wormhole
from wormhole.spark.preflight import (
    MODULE_HINT,
    PATH_HINT,
    PROBE_PREFIX,
    VERSION_HINT,
    _problems,
    file_destinations,
    jdbc_driver_classes,
    place_probes,
)


def test_the_jdbc_driver_classes_of_the_jars() -> None:
    jar = Path("/usr/share/java/mariadb-java-client.jar")
    if not jar.is_file():
        pytest.skip("Debian's libmariadb-java is not installed")
    assert jdbc_driver_classes([str(jar), "/nowhere.jar"]) == ["org.mariadb.jdbc.Driver"]


def test_file_destinations_written_in_the_executors(tmp_path: Path) -> None:
    from wormhole.task_spec import TaskSpec

    spec = TaskSpec.from_mapping({
        "source": {"plugin": "stream", "params": {"rows": 1}},
        "destinations": [
            {"id": "pq", "plugin": "file", "params": {"path": str(tmp_path / "pq"), "format": "parquet"}},
            {"id": "lines", "plugin": "file", "params": {"path": str(tmp_path / "lines"), "format": "jsonl"}},
            {"id": "lite", "plugin": "sqlite", "params": {"path": str(tmp_path / "x.db"), "table": "t",
                                                          "create": True}}]})
    # sqlite is written on the driver: no shared storage needed.
    assert [d for d, _ in file_destinations(spec.destinations)] == ["pq", "lines"]


def test_a_probe_goes_in_the_nearest_existing_directory(tmp_path: Path) -> None:
    (tmp_path / "exists").mkdir()
    probes = place_probes([("a", str(tmp_path / "exists" / "new" / "deeper")), ("b", str(tmp_path / "exists"))])
    assert [p.file.parent for p in probes] == [tmp_path / "exists", tmp_path / "exists"]
    assert all(p.file.name.startswith(PROBE_PREFIX) and p.file.is_file() for p in probes)


def test_reports_become_problems_naming_the_executor_and_the_fix() -> None:
    reports = [
        {"executor": "w1:0", "python": "/usr/bin/python3", "version": None,
         "missing": "ModuleNotFoundError: No module named 'pyarrow'", "unseen": []},
        {"executor": "w2:1", "python": "./wormhole_env/bin/python", "version": "0.0.1", "missing": None,
         "unseen": [("out", "/data/.wormhole-probe-1")]},
        {"executor": "w3:2", "python": "./wormhole_env/bin/python", "version": wormhole.__version__,
         "missing": None, "unseen": []},
    ]
    # A hive destination probes two places (warehouse, staging): each unseen probe names its own path.
    assert _problems(reports, {("out", "/data/.wormhole-probe-1"): "/data/out"}) == [
        f"executor w1:0 (Python /usr/bin/python3): ModuleNotFoundError: No module named 'pyarrow': {MODULE_HINT}",
        f"executor w2:1 (Python ./wormhole_env/bin/python) imports wormhole 0.0.1, the driver runs "
        f"{wormhole.__version__}: {VERSION_HINT}",
        f"executor w2:1 (Python ./wormhole_env/bin/python) cannot see destination out's path /data/out: {PATH_HINT}",
    ]
