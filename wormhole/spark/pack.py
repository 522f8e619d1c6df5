"""``wormhole spark pack``: one relocatable archive of a Python, wormhole and its dependencies, for
executors on workers that have only Java (``[spark] archive``; Spark ships it with ``spark.archives``
and unpacks it in each executor's working directory, whose ``wormhole_env/bin/python`` they run).

Why not venv-pack or a pex: both leave the interpreter out (the workers would need the same Python at
the same path, the very thing that failed), and venv-pack refuses an editable install (a checkout's
wormhole). The archive here holds the running interpreter with its standard library and shared
library, the installed distributions wormhole needs (``install_requires`` and the ``spark`` extra,
followed through their own requirements and extras) except pyspark and py4j, which each worker's own
Spark puts on the executors' path, and the wormhole package itself as its files. ``bin/python`` is a
``/bin/sh`` wrapper that points the interpreter at its own directory (``PYTHONHOME``,
``LD_LIBRARY_PATH``), so it runs from wherever Spark unpacked it. The workers need the same OS and
architecture as this machine (the interpreter's glibc, libssl).
"""

from __future__ import annotations

import importlib.metadata as metadata
import os
import re
import sys
import sysconfig
import tarfile
import tempfile
from collections.abc import Iterator
from pathlib import Path

from packaging.requirements import Requirement

import wormhole

LEFT_OUT = frozenset({"pyspark", "py4j"})
"""Each worker's Spark installation gives the executors its own (matching its JVM side)."""
STDLIB_SKIPPED = frozenset({"site-packages", "test", "idlelib", "tkinter", "turtledemo", "ensurepip", "__pycache__"})

_WRAPPER = """#!/bin/sh
# wormhole's shipped Python: the interpreter next to this script, whatever directory it was unpacked in.
here=$(cd "$(dirname "$0")/.." && pwd)
PYTHONHOME="$here" LD_LIBRARY_PATH="$here/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \\
    exec "$here/bin/python%(version)s" "$@"
"""


def _key(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def distributions(root: str = "wormhole", extras: tuple[str, ...] = ("spark",)) -> list[metadata.Distribution]:
    """The installed distributions ``root[extras]`` needs, followed through their requirements and
    extras, without :data:`LEFT_OUT` (and without ``root`` itself)."""
    found: dict[str, metadata.Distribution] = {}
    todo: list[tuple[str, frozenset[str]]] = [(root, frozenset(extras))]
    done: set[tuple[str, frozenset[str]]] = set()
    while todo:
        name, wanted = todo.pop()
        if (_key(name), wanted) in done or _key(name) in LEFT_OUT:
            continue
        done.add((_key(name), wanted))
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue  # a requirement for another platform or Python, not installed here
        if _key(name) != _key(root):
            found[_key(name)] = dist
        for text in dist.requires or []:
            req = Requirement(text)
            if req.marker is None or any(req.marker.evaluate({"extra": e}) for e in (*wanted, "")):
                todo.append((req.name, frozenset(req.extras)))
    return sorted(found.values(), key=lambda d: _key(d.metadata["Name"]))


def _interpreter() -> tuple[Path, Path | None, Path]:
    """(the real interpreter binary, its shared libpython or None, the standard library directory)."""
    binary = Path(getattr(sys, "_base_executable", sys.executable)).resolve()
    libdir, shared = sysconfig.get_config_var("LIBDIR"), sysconfig.get_config_var("INSTSONAME")
    library = Path(libdir) / shared if libdir and shared and sysconfig.get_config_var("Py_ENABLE_SHARED") else None
    return binary, library if library is not None and library.is_file() else None, Path(sysconfig.get_paths()["stdlib"])


def _stdlib_files(stdlib: Path) -> Iterator[Path]:
    for path in sorted(stdlib.rglob("*")):
        relative = path.relative_to(stdlib)
        if relative.parts[0] in STDLIB_SKIPPED or relative.parts[0].startswith("config-") \
                or "__pycache__" in relative.parts or not path.is_file():
            continue
        yield path


def pack(output: Path, compresslevel: int = 1) -> tuple[Path, int]:
    """Write the archive to ``output`` (.tar.gz); (its path, how many files it holds)."""
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    lib = f"lib/python{version}"
    binary, library, stdlib = _interpreter()
    output.parent.mkdir(parents=True, exist_ok=True)
    tmp = output.with_name(f".{output.name}.{os.getpid()}.tmp")
    count = 0
    with tarfile.open(tmp, "w:gz", compresslevel=compresslevel) as tar:
        def add(path: Path, arcname: str) -> None:
            nonlocal count
            tar.add(str(path), arcname=arcname, recursive=False)
            count += 1

        with tempfile.TemporaryDirectory() as scratch:
            wrapper = Path(scratch) / "python"
            wrapper.write_text(_WRAPPER % {"version": version})
            wrapper.chmod(0o755)
            for name in ("python", "python3"):
                add(wrapper, f"bin/{name}")
        add(binary, f"bin/python{version}")
        if library is not None:
            add(library, f"lib/{library.name}")
        for path in _stdlib_files(stdlib):
            add(path, f"{lib}/{path.relative_to(stdlib).as_posix()}")
        site = f"{lib}/site-packages"
        for dist in distributions():
            for file in dist.files or []:
                source = Path(str(dist.locate_file(file)))
                if source.is_file() and "__pycache__" not in file.parts and not str(file).startswith(".."):
                    add(source, f"{site}/{file.as_posix()}")
        package = Path(wormhole.__file__).resolve().parent  # its files, also from an editable checkout
        for path in sorted(package.rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                add(path, f"{site}/wormhole/{path.relative_to(package).as_posix()}")
    os.replace(tmp, output)
    return output, count


def default_output() -> Path:
    return Path("var") / "spark" / f"wormhole-env-{wormhole.__version__}.tar.gz"
