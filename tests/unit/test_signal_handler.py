"""SIGTERM arriving while the main thread is inside a log write must not deadlock the run.

The handler runs on the main thread between two bytecodes; if that thread holds the log stream's lock
(or an Event's), a handler that logs or stops the engine itself waits for a lock its own thread holds.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent("""
    import os, signal, sys, threading, time
    import structlog
    from wormhole import log
    from wormhole.runner.signals import install_signal_handlers

    class Stream:
        # SIGTERM is sent from inside the write of one chosen line: the logger's lock is held then.
        def __init__(self):
            self.lines = []
        def write(self, text):
            if "trigger" in text and not self.lines:
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(0.2)  # the handler runs here, inside the write
            self.lines.append(text)
        def flush(self):
            pass
        def isatty(self):
            return False

    class Engine:
        stopped = threading.Event()
        def stop(self, reason):
            self.reason = reason
            self.stopped.set()

    stream, engine = Stream(), Engine()
    log.configure("json", "info", stream=stream)
    install_signal_handlers(engine, structlog.get_logger())
    structlog.get_logger().info("trigger")
    assert engine.stopped.wait(5), "the engine was never stopped"
    time.sleep(0.1)
    sys.stderr.write("".join(stream.lines))
    print(engine.reason)
""")


def test_sigterm_inside_a_log_write_stops_the_engine_without_deadlock() -> None:
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=20)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "interrupted by SIGTERM"
    assert '"event": "trigger"' in done.stderr and '"event": "task.signal_received"' in done.stderr
