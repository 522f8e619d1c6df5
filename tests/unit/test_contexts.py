"""Plugin contexts: a bound logger and a stop signal, rebuilt from plain keys where Spark unpickles them."""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
import threading

from wormhole.plugins.base import Column, ReadContext, Schema, WriteContext


def write_ctx() -> WriteContext:
    return WriteContext(task_id=3, run_id=4, destination="dw", schema=Schema((Column("id", "int"),)),
                        batch_rows=10, concurrency=2, plugin="mysql", stop=threading.Event())


def test_a_pickled_context_keeps_its_keys_and_gets_a_fresh_logger_and_stop_signal() -> None:
    ctx = write_ctx()
    ctx.stop.set()
    copy = pickle.loads(pickle.dumps(ctx))
    assert copy == ctx  # every plain key survives
    assert not copy.stop.is_set() and copy.stop is not ctx.stop  # a stop signal of the executor's own
    bound = copy.log._context  # structlog's bound values
    assert (bound["task_id"], bound["run_id"], bound["plugin"], bound["destination"]) == (3, 4, "mysql", "dw")


def test_an_executor_that_unpickles_a_context_logs_json_lines_to_stderr() -> None:
    """A Spark worker never configured structlog: its store events are JSON on stderr, stdout stays clean."""
    ctx = ReadContext(task_id=5, run_id=6, batch_rows=10, dirty=None, plugin="file")  # type: ignore[arg-type]
    code = ("import pickle, sys; ctx = pickle.loads(sys.stdin.buffer.read()); "
            "ctx.log.bind(split_id='s1').info('reader.split_done', rows=7)")
    done = subprocess.run([sys.executable, "-c", code], input=pickle.dumps(ctx), capture_output=True, check=True)
    assert done.stdout == b""
    event = json.loads(done.stderr.decode().strip())
    assert (event["event"], event["task_id"], event["run_id"], event["plugin"], event["split_id"], event["rows"]) == (
        "reader.split_done", 5, 6, "file", "s1", 7)
