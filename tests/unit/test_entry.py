"""The ``wormhole`` command's process-wide start (:mod:`wormhole.entry`): what it keeps out of a run."""

from __future__ import annotations

import os
import subprocess
import sys

# Run the real entry point in a fresh interpreter (``wormhole plugins``, a command that imports the whole CLI),
# with an audit of what the process holds once the command has run.
_CHECK = """
import atexit, gc, os, sys
def audit():
    print("rich" in sys.modules, os.environ.get("OPENBLAS_NUM_THREADS"), gc.isenabled(), gc.get_freeze_count() > 0)
atexit.register(audit)
sys.argv = ["wormhole", "plugins"]
from wormhole.entry import main
main()
"""


def test_a_run_keeps_rich_out_sets_one_openblas_thread_and_collects_with_start_up_frozen() -> None:
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    proc = subprocess.run([sys.executable, "-c", _CHECK], capture_output=True, text=True, timeout=60, env=env)
    assert proc.returncode == 0, proc.stderr
    rich_loaded, threads, collecting, frozen = proc.stdout.strip().splitlines()[-1].split()
    assert (rich_loaded, threads, collecting, frozen) == ("False", "1", "True", "True")


def test_a_thread_count_the_user_chose_is_kept() -> None:
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "4"}
    proc = subprocess.run([sys.executable, "-c", _CHECK], capture_output=True, text=True, timeout=60, env=env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1].split()[1] == "4"


def test_a_package_hidden_for_one_import_is_importable_afterwards() -> None:
    code = ("import sys\nfrom wormhole.entry import _import_without\n_import_without('structlog', 'rich')\n"
            "import structlog.dev\nassert structlog.dev.rich is None and 'rich' not in sys.modules\n"
            "import rich.console\nprint('ok')\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr
