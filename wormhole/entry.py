"""The ``wormhole`` command's entry point: the process-wide choices made before the CLI is imported.

- numpy (which pyarrow imports) lets OpenBLAS start a worker thread per core that spins after start-up:
  about 0.1 s of a core per run, measured on 2 cores, and wormhole does no linear algebra. One thread,
  unless the user set ``OPENBLAS_NUM_THREADS``.
- Importing makes a few hundred thousand objects that live to the end, which the cyclic collector would
  walk again and again meanwhile (35 ms of a 0.3 s start, measured): it is off while the CLI is imported,
  and :func:`wormhole.cli.main` freezes what start-up made so later collections skip it.
- structlog looks for rich when it is imported, to draw exceptions in boxes: 25 ms of rich's modules a run.
  wormhole's log turns exceptions into plain text before any renderer sees them (``format_exc_info``), so
  structlog is imported with rich out of its sight; the terminal progress display imports rich itself.
"""

from __future__ import annotations

import gc
import importlib
import importlib.abc
import os
import sys
from typing import Any


class _Hidden(importlib.abc.MetaPathFinder):
    def __init__(self, *packages: str) -> None:
        self.packages = packages

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> None:
        if name.split(".")[0] in self.packages:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)


def _import_without(module: str, *packages: str) -> None:
    """Import ``module`` (if it is not yet) with ``packages`` unimportable meanwhile."""
    if module in sys.modules or any(p in sys.modules for p in packages):
        return
    hide = _Hidden(*packages)
    sys.meta_path.insert(0, hide)
    try:
        importlib.import_module(module)
    finally:
        sys.meta_path.remove(hide)


def main() -> None:
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    collecting = gc.isenabled()
    gc.disable()
    try:
        _import_without("structlog", "rich")
        from wormhole.cli import main as cli_main
    finally:
        if collecting:
            gc.enable()
    cli_main()
