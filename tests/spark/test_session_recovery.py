"""A broken SparkSession costs the test that broke it, not every Spark test after it (tests/spark/conftest.py
replaces a session that no longer answers before each test)."""

from __future__ import annotations

import pytest
from structlog.testing import capture_logs

from tests.spark_helpers import answering_session, run_task
from wormhole.config import EngineConf
from wormhole.spark.session import get_session, session_fault

pytestmark = pytest.mark.spark


def test_a_session_stopped_under_the_run_is_replaced_before_the_next_test(spark_conf: EngineConf) -> None:
    broken = get_session(spark_conf.spark)
    # What a test interrupted in its teardown can leave: the context stopped, the session still cached.
    broken.sparkContext.stop()
    assert session_fault(broken) == "the SparkContext is stopped"

    with capture_logs() as events:
        assert answering_session(spark_conf) == "the SparkContext is stopped"
    # Its JVM still answered, so the new session is built in it: seconds, not a JVM start.
    assert [e["jvm_kept"] for e in events if e["event"] == "spark.session_discarded"] == [True]
    fresh = get_session(spark_conf.spark)
    assert fresh is not broken and session_fault(fresh) is None
    # The next task runs on the new session as on the first.
    result, _ = run_task(spark_conf, {"source": {"plugin": "stream", "params": {"rows": 500, "splits": 2}},
                                      "destinations": [{"id": "a", "plugin": "stream"}],
                                      "settings": {"engine": "spark"}})
    assert result.exit_code == 0 and result.result["engine"] == "spark", result.result
    assert result.result["destinations"]["a"]["rows_written"] == 500
    assert answering_session(spark_conf) is None
