"""Checks across a task's destinations: resources that admit one writer, and paths two destinations share."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from wormhole.options import Problems
from wormhole.plugins import registry


def _single_writer_key(dest: Any) -> str | None:
    """The resource ``dest`` writes that admits one writing destination, if its store names one."""
    key = registry.sink(dest.plugin).single_writer_key
    return key(dest.options) if key is not None else None


def _owned_path(dest: Any) -> str | None:
    """The path ``dest`` writes in or over, if its store names one."""
    path = registry.sink(dest.plugin).owned_path
    return path(dest.options) if path is not None else None


def check_single_writers(destinations: tuple[Any, ...], problems: Problems) -> None:
    taken: dict[str, int] = {}
    for i, dest in enumerate(destinations):
        key = _single_writer_key(dest) if dest is not None else None
        if key is None:
            continue
        if key in taken:
            problems.add(f"destinations[{i}].params",
                         f"writes {key} like destinations[{taken[key]}]; it admits one writing destination per task")
        else:
            taken[key] = i


def check_owned_paths(destinations: tuple[Any, ...], problems: Problems) -> None:
    """Two destinations writing the same path, or one inside the other's directory, write over each
    other: refused, naming both. Paths are compared resolved (relative to the working directory,
    ``..``, trailing slashes and symbolic links resolved); pairs ``_check_single_writers`` already
    reports are left to it."""
    owned: list[tuple[int, Path, str | None]] = []
    for i, dest in enumerate(destinations):
        raw = _owned_path(dest) if dest is not None else None
        if dest is None or raw is None:
            continue
        try:
            path = Path(raw).resolve()
        except (OSError, RuntimeError):  # a symbolic link loop: compare it as written
            path = Path(raw).absolute()
        key = _single_writer_key(dest)
        for j, other, other_key in owned:
            if key is not None and key == other_key:
                continue
            if path == other:
                relation, detail = "the same path as", str(path)
            elif path.is_relative_to(other):
                relation, detail = "inside the path of", f"{path} is in {other}"
            elif other.is_relative_to(path):
                relation, detail = "a directory holding the path of", f"{other} is in {path}"
            else:
                continue
            # Both key paths first: a long path at the end may be cut (MAX_MESSAGE).
            problems.add(f"destinations[{i}].params.path",
                         f"is {relation} destinations[{j}].params.path; two destinations may not write the "
                         f"same path or one inside the other ({detail})")
            break
        owned.append((i, path, key))
