"""The pieces of a DataX job import: parameter access with a record of what was used, jdbcUrl parsing
(MySQL's, and PostgreSQL's with its name folding), and the DataX settings that become the task's
``settings`` (speed, errorLimit).

Every key of a DataX object is either translated or reported as an :class:`Untranslated` item with
its key path, so nothing in a job is dropped silently. Reader and writer translators live in
:mod:`wormhole.importers.datax_plugins`; the job and ``--merge`` assembly in :mod:`.datax`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

from wormhole.errors import ConfigError
from wormhole.redaction import redact_url

MAX_CHANNELS = 1024
"""wormhole's bound on ``settings.speed.channel``."""


class DataxImportError(ConfigError):
    """The job cannot be turned into a task that reads what DataX would read (exit 204)."""

    code = "DATAX_IMPORT_ERROR"


@dataclass(frozen=True, slots=True)
class Untranslated:
    """A DataX setting the task does not carry (or carries differently), and why."""

    job: str
    """The job it belongs to (its file name), so merged jobs' reports stay apart."""
    path: str
    """Its key path in the DataX job, e.g. ``job.content[0].writer.parameter.session``."""
    reason: str


class Params:
    """A DataX object being translated: reads mark keys as used; :meth:`report_rest` reports the others."""

    def __init__(self, raw: Any, path: str, notes: list[Untranslated], job: str) -> None:
        if not isinstance(raw, dict):
            raise DataxImportError(f"{job}: {path} must be a JSON object, got {type(raw).__name__}")
        self.raw: dict[str, Any] = raw
        self.path = path
        self.notes = notes
        self.job = job
        self.used: set[str] = set()

    def at(self, key: str | int) -> str:
        if isinstance(key, int):
            return f"{self.path}[{key}]"
        return f"{self.path}.{key}" if self.path else key

    def child(self, key: str, default: Any = None) -> Params:
        """The nested object under ``key`` (``default`` when absent, an empty object unless given)."""
        return Params(self.get(key, {} if default is None else default), self.at(key), self.notes, self.job)

    def has(self, key: str) -> bool:
        return key in self.raw

    def get(self, key: str, default: Any = None) -> Any:
        self.used.add(key)
        value = self.raw.get(key)
        return default if value is None else value

    def note(self, key: str | int, reason: str) -> None:
        self.notes.append(Untranslated(self.job, self.at(key), reason))

    def fail(self, key: str | int, message: str) -> DataxImportError:
        return DataxImportError(f"{self.job}: {self.at(key)}: {message}")

    def text(self, key: str, *, required: bool = False) -> str | None:
        """A non-blank string (numbers are accepted as DataX does and turned into text)."""
        value = self.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            value = str(value)
        if value is None or (isinstance(value, str) and not value.strip()):
            if required:
                raise self.fail(key, "is required")
            return None
        if not isinstance(value, str):
            raise self.fail(key, f"must be a string, got {type(value).__name__}")
        return value

    def texts(self, key: str) -> list[str]:
        """A list of non-blank strings; a single string counts as a list of one (DataX accepts both)."""
        value = self.get(key, [])
        items = [value] if isinstance(value, str) else value
        if not isinstance(items, list) or not all(isinstance(v, str) for v in items):
            raise self.fail(key, "must be a string or a list of strings")
        return [v for v in items if v.strip()]

    def objects(self, key: str, *, required: bool = False) -> list[Params]:
        value = self.get(key, [])
        if isinstance(value, dict):
            value = [value]
        if not isinstance(value, list) or (required and not value):
            raise self.fail(key, "must be a non-empty list of objects" if required else "must be a list of objects")
        return [Params(v, f"{self.at(key)}[{i}]", self.notes, self.job) for i, v in enumerate(value)]

    def number(self, key: str) -> float | None:
        """A number; numeric strings are accepted (DataX reads settings with lenient getters)."""
        value = self.get(key)
        if value is None:
            return None
        if isinstance(value, str):
            try:
                value = float(value)
            except ValueError:
                raise self.fail(key, f"must be a number, got {value!r}") from None
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
            raise self.fail(key, f"must be a number, got {value!r}")
        return value

    def integer(self, key: str) -> int | None:
        value = self.number(key)
        if value is None:
            return None
        if value != int(value):
            raise self.fail(key, f"must be a whole number, got {value!r}")
        return int(value)

    def report_rest(self, reasons: Mapping[str, str] | None = None) -> None:
        """Report every key no translator read, with its specific reason when one is known."""
        for key in self.raw:
            if key not in self.used:
                self.note(key, (reasons or {}).get(key, "no wormhole equivalent; not translated"))


# ---------------------------------------------------------------------------------------------
# jdbcUrl

_JDBC = re.compile(r"jdbc:(?:mysql|mariadb)://(?P<hosts>[^/?#;]+)/(?P<db>[^?#;]*)(?:[?;](?P<props>.*))?",
                   re.IGNORECASE | re.DOTALL)


@dataclass(frozen=True, slots=True)
class Server:
    host: str
    port: int
    database: str
    failover: tuple[str, ...] = ()
    """Further servers (``host:port``) in the order DataX tries them: the mysql store's ``failover_hosts``."""

    def params(self) -> dict[str, Any]:
        """The mysql store's connection keys for this server."""
        out: dict[str, Any] = {"host": self.host, "port": self.port}
        if self.failover:
            out["failover_hosts"] = list(self.failover)
        out["database"] = self.database
        return out


def parse_jdbc_urls(p: Params, key: str) -> Server:
    """A connection's ``jdbcUrl`` list: DataX tries its URLs in order (and a URL's comma-separated hosts,
    as Connector/J does) until one answers; the mysql store does the same with ``failover_hosts``.
    Every URL must name the same database."""
    urls = p.texts(key)
    if not urls:
        raise p.fail(key, "is required")
    servers = [parse_jdbc_url(url, p, key) for url in urls]
    databases = {s.database for s in servers}
    if len(databases) > 1:
        raise p.fail(key, f"the URLs name different databases ({', '.join(sorted(databases))}); wormhole's "
                          f"failover hosts share one database: give one database, or split the connection")
    first = servers[0]
    entries = [e for s in servers for e in (f"{_bracket(s.host)}:{s.port}", *s.failover)]
    failover = [e for i, e in enumerate(entries) if i > 0 and e not in entries[:i]]  # in order, once each
    return Server(first.host, first.port, first.database, tuple(failover))


def _bracket(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def parse_jdbc_url(url: str, p: Params, key: str | int) -> Server:
    """``jdbc:mysql://host[:port][,host2...]/database[?props]`` as host, port, failover hosts and database.

    Properties are reported: wormhole connects with its own session settings (utf8mb4), so they
    change nothing it does.
    """
    match = _JDBC.fullmatch(url.strip())
    shown = redact_url(url.strip())  # a password typed into the URL (unencoded, even) is never echoed
    if match is None:
        raise p.fail(key, f"{shown!r} is not a MySQL JDBC URL (jdbc:mysql://host:port/database)")
    if "@" in match["hosts"]:
        raise p.fail(key, "credentials inside the jdbcUrl are not supported; use username/password")
    database = unquote(match["db"])
    if not database:
        raise p.fail(key, f"{shown!r} names no database; wormhole needs jdbc:mysql://host:port/database")
    hosts = [_host_port(h.strip(), p, key) for h in match["hosts"].split(",") if h.strip()]
    if match["props"]:
        names = [prop.split("=", 1)[0] for prop in re.split(r"[&;]", match["props"]) if prop]
        p.note(key, f"connection properties {', '.join(names)} are not used: wormhole's mysql store "
                    f"connects with its own settings (utf8mb4, strict mode for writes)")
    host, port = hosts[0]
    return Server(host, port, database, tuple(f"{_bracket(h)}:{pt}" for h, pt in hosts[1:]))


def _host_port(text: str, p: Params, key: str | int, default: int = 3306) -> tuple[str, int]:
    if text.startswith("["):  # [IPv6]:port
        host, _, rest = text[1:].partition("]")
        port_text = rest.removeprefix(":")
    else:
        host, _, port_text = text.partition(":")
    if not port_text:
        return host, default
    if not (port_text.isascii() and port_text.isdigit()) or not 0 < int(port_text) < 65536:
        raise p.fail(key, f"port {port_text!r} is not a TCP port")
    return host, int(port_text)


# ---------------------------------------------------------------------------------------------
# PostgreSQL: jdbcUrl and names

_PG_JDBC = re.compile(r"jdbc:postgresql:(?://(?P<hosts>[^/?#]*))?/?(?P<db>[^?#]*)(?:\?(?P<props>.*))?",
                      re.IGNORECASE | re.DOTALL)
_PG_PART = re.compile(r'"((?:[^"]|"")+)"|([A-Za-z_\u0080-\uffff][A-Za-z0-9_$\u0080-\uffff]*)')
_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")
_PG_CREDENTIALS = {"user", "password"}


@dataclass(frozen=True, slots=True)
class PgServer:
    """A PostgreSQL jdbcUrl as the postgres store's connection keys."""

    host: str
    port: int
    database: str
    schema: str | None = None
    """``currentSchema`` of the URL, or the schema a ``schema.table`` name gives (None: the store's default)."""

    def params(self) -> dict[str, Any]:
        out: dict[str, Any] = {"host": self.host, "port": self.port, "database": self.database}
        if self.schema is not None:
            out["schema"] = self.schema
        return out


def pg_names(text: str) -> list[str] | None:
    """A dotted name as PostgreSQL reads it: unquoted parts folded to lower case (ASCII only, as the
    server folds them), ``"quoted"`` ones kept; None when ``text`` is anything else (an expression,
    a constant). DataX sends names unquoted into its SQL, so ``Orders`` is the table ``orders``."""
    name, parts, pos = text.strip(), [], 0
    while True:
        match = _PG_PART.match(name, pos)
        if match is None:
            return None
        quoted, plain = match.groups()
        if plain is not None and plain.lower() in ("null", "true", "false"):
            return None  # SQL's literals, never names
        parts.append(quoted.replace('""', '"') if quoted is not None else plain.translate(_ASCII_LOWER))
        pos = match.end()
        if pos == len(name):
            return parts
        if name[pos] != ".":
            return None
        pos += 1


def pg_name(text: str) -> str | None:
    """One column name as PostgreSQL reads it (see :func:`pg_names`), or None."""
    parts = pg_names(text)
    return parts[0] if parts is not None and len(parts) == 1 else None


def parse_pg_jdbc_urls(p: Params, key: str) -> PgServer:
    """A connection's ``jdbcUrl`` (a list for a reader: DataX tries them in order). The postgres store
    connects to one server, so the first URL's first host is used and the others are reported."""
    urls = p.texts(key)
    if not urls:
        raise p.fail(key, "is required")
    servers = [_pg_url(url, p, key) for url in urls]
    first, others = servers[0][0], [h for hosts in servers for h in hosts][1:]
    if others:
        shown = ", ".join(f"{_bracket(s.host)}:{s.port}/{s.database}" for s in others)
        p.note(key, f"wormhole's postgres store connects to one server ({_bracket(first.host)}:{first.port}); "
                    f"the others DataX would try ({shown}) are not used")
    return first


def _pg_url(url: str, p: Params, key: str) -> list[PgServer]:
    match = _PG_JDBC.fullmatch(url.strip())
    shown = redact_url(url.strip())  # a password in the URL is never echoed
    if match is None:
        raise p.fail(key, f"{shown!r} is not a PostgreSQL JDBC URL (jdbc:postgresql://host:port/database)")
    hosts_text = match["hosts"]
    if hosts_text is not None and "@" in hosts_text:
        raise p.fail(key, "credentials inside the jdbcUrl are not supported; use username/password")
    database = unquote(match["db"])
    if not database:
        raise p.fail(key, f"{shown!r} names no database; wormhole needs jdbc:postgresql://host:port/database")
    schema = _pg_properties(match["props"] or "", p, key)
    texts = [h.strip() for h in (hosts_text or "").split(",") if h.strip()] or ["localhost"]  # pgjdbc's default
    return [PgServer(host, port, database, schema)
            for host, port in (_host_port(h, p, key, default=5432) for h in texts)]


def _pg_properties(props: str, p: Params, key: str) -> str | None:
    """``currentSchema`` (pgjdbc's search_path) becomes the schema of unqualified tables; credentials are
    refused (without showing them); any other property is reported."""
    pairs = [prop.partition("=") for prop in props.split("&") if prop]
    names = {name for name, _, _ in pairs}
    if names & _PG_CREDENTIALS:
        raise p.fail(key, "credentials inside the jdbcUrl are not supported; use username/password")
    schema = None
    for name, _, value in pairs:
        if name == "currentSchema" and value:
            first = unquote(value).split(",")[0]
            schema = (pg_names(first) or [first])[0]
            if "," in unquote(value):
                p.note(key, f"currentSchema {unquote(value)!r}: unqualified tables are read from {schema!r}, "
                            "the first schema of the list")
    others = [name for name, _, _ in pairs if name != "currentSchema"]
    if others:
        p.note(key, f"connection properties {', '.join(others)} are not used: wormhole's postgres store "
                    "connects with its own settings (UTF-8, UTC, ISO dates)")
    return schema


# ---------------------------------------------------------------------------------------------
# job.setting and core


@dataclass(frozen=True, slots=True)
class Speed:
    """What a job's ``job.setting.speed`` and ``core.transport.channel.speed`` become."""

    settings: dict[str, int]
    """The task's ``settings.speed``: the byte/record limits with their per-channel rates, or the
    channel count when the job sets no limit (empty: neither)."""
    channels: int | None
    """DataX's own channel count (JobContainer.adjustChannelNumber): a streamreader makes
    ``sliceRecordCount`` rows in each channel."""


def speed(setting: Params, core: Params) -> Speed:
    """``job.setting.speed`` as ``settings.speed``: wormhole enforces byte and record limits for the
    whole task (DataX only derives a channel count from them), so they are carried as limits, with
    ``core.transport.channel.speed.byte/record`` as ``channel_byte/channel_record``, from which the
    engine derives the channel count as DataX does. ``speed.channel`` is kept when no limit is set.
    """
    job_speed = setting.child("speed")
    per_channel = core.child("transport").child("channel").child("speed")
    out: dict[str, int] = {}
    counts = []
    for name in ("byte", "record"):
        total = job_speed.integer(name)
        per = per_channel.integer(name)
        per = per if per is not None and per > 0 else None  # DataX's core.json has -1: no per-channel rate
        if total is None or total <= 0:  # no limit, as in DataX
            if per is not None:
                per_channel.note(name, f"a per-channel rate without job.setting.speed.{name}: wormhole limits "
                                       "the whole task's rate, not each channel's; not translated")
            continue
        out[name] = total
        if per is not None:
            out[f"channel_{name}"] = per
            counts.append(max(1, total // per))
        else:
            job_speed.note(name, f"enforced as settings.speed.{name}; the job sets no "
                                 f"core.transport.channel.speed.{name} (DataX would refuse it), so the "
                                 f"channel count needs engine.toml [speed] channel_{name}: without it the "
                                 f"task is refused (exit 204), as DataX refuses it")
    channel = job_speed.integer("channel")
    job_speed.report_rest()
    if out and channel is not None:
        job_speed.note("channel", "ignored, as DataX does: the byte/record limit sets the channel count")
    chosen = min(counts) if counts else (channel if channel is not None and channel > 0 else None)
    if chosen is not None and chosen > MAX_CHANNELS:
        job_speed.note("channel", f"{chosen} channels cut to wormhole's maximum of {MAX_CHANNELS}")
        chosen = MAX_CHANNELS
    if out:
        return Speed(out, chosen)
    return Speed({"channel": chosen} if chosen is not None else {}, chosen)


def error_limit(setting: Params) -> dict[str, Any]:
    """``job.setting.errorLimit`` as wormhole's ``error_limit``; absent means no limit, as in DataX."""
    limit = setting.child("errorLimit")
    out: dict[str, Any] = {}
    record = limit.integer("record")
    if record is not None:
        if record < 0:
            raise limit.fail("record", f"must be 0 or more, got {record}")
        out["record"] = record
    percentage = limit.number("percentage")
    if percentage is not None:
        if not 0 <= percentage <= 1:
            raise limit.fail("percentage", f"must be between 0 and 1 (a fraction), got {percentage}")
        out["percentage"] = float(percentage)
    limit.report_rest()
    return out


def report_leaves(p: Params, skip: tuple[str, ...] = ()) -> None:
    """Report every leaf setting under ``p`` except the dotted paths in ``skip`` (already translated)."""
    for key, value in p.raw.items():
        if key in skip:
            continue
        inner = tuple(s.split(".", 1)[1] for s in skip if s.startswith(f"{key}."))
        if isinstance(value, dict) and value:
            report_leaves(Params(value, p.at(key), p.notes, p.job), inner)
        else:
            p.note(key, "engine setting with no wormhole task equivalent; not translated")
