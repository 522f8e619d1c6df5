"""pyspark is loaded only by tasks that use Spark: the store entries, ``wormhole plugins`` and a local
task between non-Spark stores never import it (the hive store's modules that reach the session do, on demand)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

from tests.conftest import REPO


def test_store_entries_and_a_local_task_never_import_pyspark(tmp_path: Path) -> None:
    script = textwrap.dedent(f"""
        import json, sys
        import structlog
        from wormhole.config import EngineConf, PathsConf
        from wormhole.task_spec import TaskSpec
        from wormhole.engine import Engine
        from wormhole.plugins import describe, registry

        for name in registry.names():
            describe.render_markdown(registry.get(name))
        spec = TaskSpec.from_mapping({{
            "settings": {{"engine": "local"}},
            "source": {{"plugin": "stream", "params": {{"rows": 1000, "splits": 2}}}},
            "destinations": [
                {{"id": fmt, "plugin": "file", "params": {{"path": {str(tmp_path)!r} + "/" + fmt, "format": fmt}}}}
                for fmt in ("csv", "jsonl", "parquet")],
        }})
        conf = EngineConf(paths=PathsConf(dirty_dir={str(tmp_path / "dirty")!r}))
        result = Engine(conf, spec, task_id=1, run_id=1, log=structlog.get_logger()).run()
        loaded = sorted(m for m in sys.modules if m.split(".")[0] in ("pyspark", "py4j")
                        or m in ("wormhole.plugins.hive.reader", "wormhole.plugins.hive.writer",
                                 "wormhole.plugins.hive.periphery", "wormhole.plugins.hive.spark",
                                 "wormhole.plugins.mysql.spark",
                                 "wormhole.plugins.file.spark", "wormhole.spark.session"))
        sys.stderr.flush()
        print(json.dumps({{"exit_code": result.exit_code, "loaded": loaded}}))
    """)
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, check=False,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    outcome = json.loads(done.stdout.splitlines()[-1])
    assert outcome == {"exit_code": 0, "loaded": []}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["csv", "jsonl", "parquet"]


def test_the_hive_store_imports_pyspark_when_used() -> None:
    """The check above can fail: loading the hive store's writer does import pyspark."""
    script = "import sys, wormhole.plugins.hive.writer; print('pyspark' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, check=False,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "True"
