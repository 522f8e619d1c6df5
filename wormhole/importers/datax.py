"""DataX job import: a DataX job (its JSON document) as a wormhole task document.

``translate([(label, job), ...])`` is the whole API: pure functions over dicts, no I/O. One job
becomes a task with one destination; several jobs that read the same source (``--merge``) become one
fan-out task, a destination per job's writer, each keeping its job's ``errorLimit``. Whatever the task
does not carry is listed in :attr:`Translation.untranslated`, each item with its DataX key path.

What maps to what:

- ``job.setting.speed``: byte/record limits become ``settings.speed.byte/record`` (enforced for the
  whole task) with ``core.transport.channel.speed.*`` as ``channel_byte/channel_record``; without a
  limit, ``speed.channel`` (see :func:`~wormhole.importers.datax_parts.speed`).
- ``job.setting.errorLimit``: ``error_limit`` (``record``, ``percentage``); no errorLimit is no limit,
  as in DataX (wormhole's own default would fail a destination on its first rejected row).
- readers and writers: :mod:`wormhole.importers.datax_plugins` (mysql, txtfile, stream) and
  :mod:`wormhole.importers.datax_postgres` (postgresql).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from wormhole.importers import datax_plugins, datax_postgres
from wormhole.importers.datax_parts import (
    DataxImportError,
    Params,
    Untranslated,
    error_limit,
    report_leaves,
    speed,
)
from wormhole.importers.datax_plugins import Destination, Source, secret

__all__ = ["DataxImportError", "Translation", "Untranslated", "log_report", "translate"]

READERS = {**datax_plugins.READERS, **datax_postgres.READERS}
WRITERS = {**datax_plugins.WRITERS, **datax_postgres.WRITERS}

_ID_CHARS = re.compile(r"[^A-Za-z0-9_.-]+")
_MAX_ID = 60
"""Destination ids have at most 64 characters; room is left for a ``_N`` suffix."""


@dataclass(frozen=True, slots=True)
class Translation:
    task: dict[str, Any]
    """The wormhole task document (validate it with ``TaskSpec.from_mapping``)."""
    untranslated: tuple[Untranslated, ...]


@dataclass(frozen=True, slots=True)
class _Job:
    label: str
    source: Source
    destination: Destination
    channels: int | None
    """DataX's channel count (a streamreader's slices)."""
    speed_settings: dict[str, int]
    error_limit: dict[str, Any]
    speed: Params


def translate(jobs: Sequence[tuple[str, Any]], *, name: str = "") -> Translation:
    """Translate one DataX job, or merge several reading the same source into one fan-out task.

    ``jobs`` holds (label, parsed JSON document) pairs; labels (file names) name the jobs in the
    report and in errors. Raises :class:`DataxImportError` when a job cannot be translated without
    reading other rows than DataX would, or when merged jobs read different sources.
    """
    if not jobs:
        raise DataxImportError("no DataX job to import")
    notes: list[Untranslated] = []
    parsed = [_job(label, raw, notes) for label, raw in jobs]
    _check_same_source(parsed, notes)
    merged = len(parsed) > 1
    destinations = []
    for job, dest_id in zip(parsed, _destination_ids(parsed)):
        dest: dict[str, Any] = {"id": dest_id, "plugin": job.destination.plugin,
                                "params": dict(job.destination.params)}
        if job.destination.password is not None:
            secret(job.destination.password, dest["params"], _password_env(dest_id))
        if merged:  # each job's errorLimit stays with its writer
            dest["error_limit"] = job.error_limit
        destinations.append(dest)
    settings: dict[str, Any] = {}
    speed_settings = _speed(parsed)
    if speed_settings:
        settings["speed"] = speed_settings
    if not merged:
        settings["error_limit"] = parsed[0].error_limit
    first = parsed[0].source
    task: dict[str, Any] = {"name": name, "source": {"plugin": first.plugin, "params": first.params}}
    if first.transforms:
        task["transforms"] = list(first.transforms)
    task.update(destinations=destinations, settings=settings)
    return Translation(task=task, untranslated=tuple(notes))


def _job(label: str, raw: Any, notes: list[Untranslated]) -> _Job:
    root = Params(raw, "", notes, label)
    if not root.has("job"):
        raise DataxImportError(f"{label}: not a DataX job (no 'job' object at the top)")
    job = root.child("job")
    core = root.child("core")
    root.report_rest()
    setting = job.child("setting")
    job_speed = speed(setting, core)
    channels = job_speed.channels
    limit = error_limit(setting)
    setting.report_rest()
    report_leaves(core, skip=("transport.channel.speed.byte", "transport.channel.speed.record"))
    content = job.objects("content", required=True)
    if len(content) > 1:
        job.note("content", f"{len(content) - 1} entries after content[0] are ignored, as DataX runs the first only")
    entry = content[0]
    reader, writer = entry.child("reader"), entry.child("writer")
    source = _plugin(reader, READERS, "reader")(_parameter(reader), channels)
    destination = _plugin(writer, WRITERS, "writer")(_parameter(writer), source)
    entry.report_rest({"transformer": "wormhole has no transformers; rows are written as read"})
    job.report_rest()
    return _Job(label, source, destination, channels, job_speed.settings, limit, setting.child("speed"))


def _parameter(plugin: Params) -> Params:
    params = plugin.child("parameter")
    plugin.report_rest()
    return params


def _plugin(p: Params, table: dict[str, Any], role: str) -> Any:
    plugin = p.text("name", required=True)
    if plugin not in table:
        raise p.fail("name", f"{plugin!r} is not supported; wormhole imports the {role}s {', '.join(table)}")
    return table[plugin]


def _check_same_source(jobs: list[_Job], notes: list[Untranslated]) -> None:
    first = jobs[0]
    different = []
    for job in jobs[1:]:
        if job.source.identity != first.source.identity:
            keys = sorted(k for k in {*job.source.identity, *first.source.identity}
                          if job.source.identity.get(k) != first.source.identity.get(k))
            different.append(f"{job.label} (differs in {', '.join(keys)})")
        elif job.source.params != first.source.params:
            notes.append(Untranslated(job.label, "job.content[0].reader.parameter.splitPk",
                                      f"the merged task reads once, split as {first.label} says"))
    if different:
        raise DataxImportError(
            f"--merge needs jobs that read the same source (reader, connection, table, column, where, "
            f"querySql): {first.label} and {'; '.join(different)} read different sources")


def _speed(jobs: list[_Job]) -> dict[str, int]:
    """The merged task's ``settings.speed``: it reads once, so with limits each is the strictest any
    job sets (the smallest per-channel rate too: the most channels, as below); without, the most
    channels any job asks."""
    limited = [j for j in jobs if set(j.speed_settings) - {"channel"}]
    if not limited:
        counts = [j.speed_settings["channel"] for j in jobs if "channel" in j.speed_settings]
        if not counts:
            return {}
        chosen = max(counts)
        for job in jobs:
            if job.speed_settings.get("channel", chosen) != chosen:
                job.speed.note("channel", f"the merged task reads once with {chosen} channels (the most any job asks)")
        return {"channel": chosen}
    merged: dict[str, int] = {}
    for key in ("byte", "record", "channel_byte", "channel_record"):
        values = [j.speed_settings[key] for j in limited if key in j.speed_settings]
        if values:
            merged[key] = min(values)
    for job in jobs:
        own = job.speed_settings
        for name in ("byte", "record"):
            pair = (merged.get(name), merged.get(f"channel_{name}"))
            if name in own and (own[name], own.get(f"channel_{name}")) != pair:
                job.speed.note(name, f"the merged task reads once with settings.speed.{name} {pair[0]} and "
                                     f"channel_{name} {pair[1]}: the strictest any job sets")
        if "channel" in own:
            job.speed.note("channel", "ignored: the merged task has the byte/record limits of other jobs")
    return merged


def _destination_ids(jobs: list[_Job]) -> list[str]:
    """Ids from the writer type and target (``mysql_db_table``, ``file_dir``), unique ignoring case."""
    taken: set[str] = set()
    ids = []
    for job in jobs:
        base = _ID_CHARS.sub("_", job.destination.id_hint)[:_MAX_ID] or "dest"
        if not (base[0].isalnum() or base[0] == "_"):
            base = f"d{base}"[:_MAX_ID]
        candidate, n = base, 1
        while candidate.casefold() in taken:
            n += 1
            candidate = f"{base}_{n}"
        taken.add(candidate.casefold())
        ids.append(candidate)
    return ids


def _password_env(dest_id: str) -> str:
    return "DATAX_" + re.sub(r"[^A-Za-z0-9]+", "_", dest_id).strip("_").upper() + "_PASSWORD"


def log_report(translation: Translation, logger: Any) -> None:
    """One ``datax.untranslated`` warning per item, then a ``datax.imported`` summary."""
    for item in translation.untranslated:
        logger.warning("datax.untranslated", job=item.job, key=item.path, reason=item.reason)
    task = translation.task
    logger.info("datax.imported", source=task["source"]["plugin"],
                destinations=[d["id"] for d in task["destinations"]], untranslated=len(translation.untranslated),
                untranslated_keys=[f"{i.job}: {i.path}" for i in translation.untranslated])
