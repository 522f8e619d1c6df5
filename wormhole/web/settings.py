"""What the console is started with: where it listens, the task database, and the tokens it accepts.

Token rules (docs/decisions.md, "The operations console"): every action needs a token, always; when the
console listens on an address other than loopback, every API request does. Tokens come from
``WORMHOLE_CONSOLE_TOKEN`` (one token, named ``console``) and/or a file (``--token-file``: one token a line,
``name:token`` naming who holds it, ``#`` comments). Without any, a random one is made and written to
``var/console.token`` (mode 0600), so actions are never open; its path is logged, never the token.
"""

from __future__ import annotations

import hmac
import ipaddress
import os
import secrets
from dataclasses import dataclass, field
from pathlib import Path

from wormhole.errors import ConfigError

TOKEN_ENV = "WORMHOLE_CONSOLE_TOKEN"
DEFAULT_TOKEN_FILE = Path("var/console.token")
MAX_BODY_BYTES = 1_048_576
"""The largest request body accepted (a task spec is a few kB; 1 MiB leaves room for big ones)."""
MIN_TOKEN_CHARS = 16


@dataclass(frozen=True, slots=True)
class Tokens:
    """Token -> the name of who holds it (what an action records as its actor)."""

    by_token: dict[str, str] = field(default_factory=dict, repr=False)
    made: Path | None = None
    """The file a token was made in (none was given)."""

    def holder(self, given: str | None) -> str | None:
        """Who holds ``given`` (None: no such token); compared in constant time."""
        if not given:
            return None
        found = None
        for token, name in self.by_token.items():
            if hmac.compare_digest(token.encode(), given.encode()):
                found = name
        return found

    def __repr__(self) -> str:  # never the tokens
        return f"Tokens({len(self.by_token)} token(s))"

    @classmethod
    def load(cls, token_file: str | None = None, *, make_at: Path = DEFAULT_TOKEN_FILE) -> Tokens:
        found: dict[str, str] = {}
        env = os.environ.get(TOKEN_ENV, "").strip()
        if env:
            found[_checked(env, TOKEN_ENV)] = "console"
        if token_file is not None:
            found.update(_read_file(Path(token_file)))
        if found:
            return cls(found)
        if make_at.is_file():
            return cls(_read_file(make_at), made=make_at)
        make_at.parent.mkdir(parents=True, exist_ok=True)
        token = secrets.token_urlsafe(24)
        fd = os.open(make_at, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(f"console:{token}\n")
        return cls({token: "console"}, made=make_at)


def _read_file(path: Path) -> dict[str, str]:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise ConfigError(f"cannot read the console's token file {path}: {exc.strerror}", path=str(path)) from exc
    found: dict[str, str] = {}
    for number, line in enumerate(lines, 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        name, colon, token = line.rpartition(":")
        found[_checked(token.strip(), f"{path} line {number}")] = name.strip() if colon and name.strip() else "console"
    if not found:
        raise ConfigError(f"the console's token file {path} holds no token", path=str(path))
    return found


def _checked(token: str, where: str) -> str:
    if len(token) < MIN_TOKEN_CHARS:
        raise ConfigError(f"the console token of {where} is too short: at least {MIN_TOKEN_CHARS} characters")
    return token


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an address to listen on) is reachable from this machine only."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def parse_listen(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:8080`` for IPv6, ``:8080`` or ``8080`` for 127.0.0.1)."""
    host, colon, port = text.rpartition(":")
    if not colon:
        host, port = "", text
    if not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"{text!r} is not HOST:PORT (a port from 0 to 65535)")
    return host.strip("[]") or "127.0.0.1", int(port)


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsoleSettings:
    """What ``--http`` starts the console with."""

    host: str = "127.0.0.1"
    port: int = 8080
    task_db: str | None = None
    conf_dir: str | None = None
    tokens: Tokens = field(default_factory=Tokens)
    max_body_bytes: int = MAX_BODY_BYTES
    dirty_rows: int = 100
    """The rejected rows a run's page shows (the file has them all)."""
    poll_s: float = 1.0
    """How often the page asks for a running task's progress."""

    @property
    def reads_need_token(self) -> bool:
        """Listening beyond this machine, every API request needs a token."""
        return not is_loopback(self.host)
