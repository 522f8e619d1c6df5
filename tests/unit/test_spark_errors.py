"""describe_spark_error on real failure texts of PySpark 4 (tests/data/spark_errors: a worker's Python
missing, a module missing in the executors, a JDBC driver class missing, a path missing)."""

from __future__ import annotations

from pathlib import Path

from wormhole.spark.errors import MODULE_HINT, PYTHON_HINT, describe_spark_error

TRACES = Path(__file__).resolve().parents[1] / "data" / "spark_errors"


def trace(name: str) -> str:
    return (TRACES / f"{name}.txt").read_text()


def test_a_missing_python_names_the_program_and_the_setting() -> None:
    text = describe_spark_error(trace("program"))
    # The line naming the program is kept, not only the deepest cause (error=2).
    assert text.startswith('IOException: Cannot run program "/nonexistent/venv/bin/python3": error=2, '
                           "No such file or directory")
    assert text.endswith(PYTHON_HINT) and "[spark] python" in text and "wormhole spark pack" in text
    assert "executor" not in text.split(":", 3)[2]  # local mode's "executor driver" is not named


def test_a_cluster_executor_is_named() -> None:
    text = describe_spark_error(trace("program").replace("(192.0.2.2 executor driver)", "(10.1.2.3 executor 1)"))
    assert '"/nonexistent/venv/bin/python3": error=2, No such file or directory (executor 1 on 10.1.2.3)' in text


def test_a_missing_module_in_the_executors() -> None:
    expected = f"ModuleNotFoundError: No module named 'wormhole_nope': {MODULE_HINT}"
    assert describe_spark_error(trace("module")) == expected


def test_a_missing_jdbc_driver_class() -> None:
    assert describe_spark_error(trace("jdbc_class")) == "ClassNotFoundException: org.nope.Driver"


def test_a_missing_path() -> None:
    expected = "[PATH_NOT_FOUND] Path does not exist: file:/nonexistent/dir. SQLSTATE: 42K03"
    assert describe_spark_error(trace("path")) == expected


def test_the_deepest_cause_is_added_when_it_says_more() -> None:
    text = ("An error occurred while calling o81.jdbc.\n"
            ": java.sql.SQLTransientConnectionException: Could not connect to address=(host=db)(port=3306)"
            "(type=master) : Socket fail to connect to host:address=(host=db)(port=3306)(type=master).\n"
            "\tat org.mariadb.jdbc.client.impl.ConnectionHelper.connectSocket(ConnectionHelper.java:136)\n"
            "Caused by: java.net.UnknownHostException: db\n"
            "\tat java.base/java.net.InetAddress$CachedAddresses.get(InetAddress.java:801)\n")
    assert describe_spark_error(text) == (
        "SQLTransientConnectionException: Could not connect to address=(host=db)(port=3306)(type=master) : Socket "
        "fail to connect to host:address=(host=db)(port=3306)(type=master). (caused by UnknownHostException: db)")


def test_our_own_errors_and_plain_text() -> None:
    ours = "Traceback...\nwormhole.errors.WriteError: d1: row 3 rejected\n"
    assert describe_spark_error(ours) == "d1: row 3 rejected"
    assert describe_spark_error(RuntimeError("something odd\nmore")) == "something odd"
