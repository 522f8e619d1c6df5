"""Small helpers for the mysql end-to-end tests: connect, create and fill tables, compare them, KILL, poll.

Everything here talks to the server with plain pymysql, independently of the plugin under test, so
what the tests see is what a user querying the database would see.
"""

from __future__ import annotations

import contextlib
import json
import re
import socket
import threading
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

import pymysql
import pymysql.connections

Connection = pymysql.connections.Connection

NO_SUCH_TABLE = 1146
UNKNOWN_THREAD = 1094


def q(name: str) -> str:
    """A backquoted identifier (the tests only use their own simple names, but quote anyway)."""
    return "`" + name.replace("`", "``") + "`"


@dataclass(frozen=True, slots=True)
class Server:
    host: str
    port: int
    user: str
    password: str

    @classmethod
    def from_url(cls, url: str) -> Server:
        u = urlparse(url)
        return cls(host=u.hostname or "127.0.0.1", port=u.port or 3306, user=u.username or "root",
                   password=u.password or "")

    def connect(self, database: str | None = None, *, user: str | None = None,
                password: str | None = None) -> Connection:
        # autocommit: every helper statement is visible at once, like a user's ad-hoc query.
        return pymysql.connect(host=self.host, port=self.port, user=user or self.user,
                               password=self.password if password is None else password, database=database,
                               charset="utf8mb4", autocommit=True, connect_timeout=5)

    def params(self, database: str | None = None, **extra: Any) -> dict[str, Any]:
        """Plugin ``params`` reaching this server as the admin user (password only when there is one)."""
        params: dict[str, Any] = {"host": self.host, "port": self.port, "user": self.user}
        if self.password:
            params["password"] = self.password
        if database is not None:
            params["database"] = database
        return {**params, **extra}


def db_of(url: str) -> str:
    """The database name of a ``mysql://.../name`` URL (the ``mysql_db`` fixture's value)."""
    return urlparse(url).path.lstrip("/")


def execute(conn: Connection, sql: str, args: Sequence[Any] | None = None) -> list[tuple[Any, ...]]:
    with conn.cursor() as cur:
        cur.execute(sql, args)
        return list(cur.fetchall())


def scalar(conn: Connection, sql: str, args: Sequence[Any] | None = None) -> Any:
    rows = execute(conn, sql, args)
    return rows[0][0] if rows else None


class Databases:
    """Creates uuid-named databases and users on the test server; ``drop_all`` removes every one."""

    def __init__(self, server: Server, admin: Connection) -> None:
        self.server = server
        self.admin = admin
        self.created: list[str] = []
        self.users: list[str] = []

    def create(self, label: str = "db") -> str:
        name = f"wh_e2e_{label}_{uuid.uuid4().hex[:8]}"
        execute(self.admin, f"CREATE DATABASE {q(name)} CHARACTER SET utf8mb4")
        self.created.append(name)
        return name

    def create_user(self, password: str) -> str:
        name = f"wh_u_{uuid.uuid4().hex[:8]}"
        execute(self.admin, "CREATE USER %s@'%%' IDENTIFIED BY %s", (name, password))
        self.users.append(name)
        return name

    def drop_all(self) -> None:
        for name in self.created:
            execute(self.admin, f"DROP DATABASE IF EXISTS {q(name)}")
        for user in self.users:
            execute(self.admin, "DROP USER IF EXISTS %s@'%%'", (user,))
        self.admin.close()


@contextmanager
def global_max_allowed_packet(admin: Connection, size: int,
                              prepare: Callable[[], None] | None = None) -> Iterator[None]:
    """The server's global ``max_allowed_packet`` set to ``size`` (sessions opened from now on take it), restored
    after. Tests that change it take turns (a server lock held by ``admin``): two at once, in two xdist workers,
    would see each other's value and restore the wrong one. ``prepare`` runs once the lock is held and before
    the change, when the global is the server's own: a session it opens then may build values wider than
    ``size`` (one opened while another test held the lock could not)."""
    if scalar(admin, "SELECT GET_LOCK('wormhole_tests_max_allowed_packet', 600)") != 1:
        raise AssertionError("another test held the max_allowed_packet lock for 10 minutes")
    try:
        if prepare is not None:
            prepare()
        before = int(scalar(admin, "SELECT @@GLOBAL.max_allowed_packet"))
        execute(admin, f"SET GLOBAL max_allowed_packet = {int(size)}")
        try:
            yield
        finally:
            execute(admin, f"SET GLOBAL max_allowed_packet = {before}")
    finally:
        execute(admin, "DO RELEASE_LOCK('wormhole_tests_max_allowed_packet')")


def create_table(conn: Connection, db: str, table: str, columns_ddl: str) -> None:
    execute(conn, f"CREATE TABLE {q(db)}.{q(table)} ({columns_ddl}) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4")


def insert_rows(conn: Connection, db: str, table: str, columns: Sequence[str], rows: Sequence[Sequence[Any]],
                chunk: int = 2000) -> None:
    sql = (f"INSERT INTO {q(db)}.{q(table)} ({', '.join(map(q, columns))}) "
           f"VALUES ({', '.join(['%s'] * len(columns))})")
    with conn.cursor() as cur:
        for start in range(0, len(rows), chunk):
            cur.executemany(sql, rows[start:start + chunk])


def fill_from_sequence(conn: Connection, db: str, table: str, rows: int, expressions: dict[str, str]) -> None:
    """Insert ``rows`` rows server-side from MariaDB's sequence engine; expressions use ``seq`` (1..rows)."""
    columns = ", ".join(map(q, expressions))
    execute(conn, f"INSERT INTO {q(db)}.{q(table)} ({columns}) "
                  f"SELECT {', '.join(expressions.values())} FROM {q(db)}.seq_1_to_{rows}")


def table_rows(conn: Connection, db: str, table: str, columns: Sequence[str]) -> list[tuple[Any, ...]]:
    return execute(conn, f"SELECT {', '.join(map(q, columns))} FROM {q(db)}.{q(table)} ORDER BY 1")


def fingerprint(conn: Connection, db: str, table: str, columns: Sequence[str]) -> tuple[Any, ...]:
    """Rows, distinct keys (first column) and order-independent sums of a per-row CRC32, computed server-side.

    QUOTE() keeps NULL apart from the text 'NULL'; SUM and BIT_XOR together catch a lost row, a
    duplicated one and a changed value, without pulling 200k rows into Python for every table.
    """
    row = f"CONCAT_WS('|', {', '.join(f'QUOTE({q(c)})' for c in columns)})"
    return tuple(execute(conn, f"SELECT COUNT(*), COUNT(DISTINCT {q(columns[0])}), SUM(CRC32({row})), "
                               f"BIT_XOR(CRC32({row})) FROM {q(db)}.{q(table)}")[0])


def tables(conn: Connection, db: str) -> list[str]:
    return [r[0] for r in execute(conn, "SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s "
                                        "ORDER BY TABLE_NAME", (db,))]


def user_tables(conn: Connection, db: str) -> list[str]:
    """``tables`` without wormhole's split-marker table when it is empty (it stays, empty, once no
    resumable run is pending; a marker row left would be a defect, so then it is listed)."""
    names = tables(conn, db)
    if "wormhole_splits" in names and not count(conn, db, "wormhole_splits"):
        names.remove("wormhole_splits")
    return names


def count(conn: Connection, db: str, table: str) -> int:
    return int(scalar(conn, f"SELECT COUNT(*) FROM {q(db)}.{q(table)}"))


def staged_rows(conn: Connection, db: str, target: str) -> int:
    """Committed rows in the tables of ``db`` other than ``target`` (the staging table, once it exists)."""
    total = 0
    for name in tables(conn, db):
        if name in (target, "wormhole_splits"):  # the split markers are no rows of the load
            continue
        try:
            total += count(conn, db, name)
        except pymysql.err.ProgrammingError as exc:
            if exc.args[0] != NO_SUCH_TABLE:  # dropped or renamed between listing and counting
                raise
    return total


def connection_ids(conn: Connection, db: str, running: str | None = None) -> list[int]:
    """Ids of the other sessions whose current database is ``db`` (a writer's connections).

    ``running``: only those executing a statement whose text matches this regular expression, to
    hit a session mid-statement rather than, say, while it commits.
    """
    sql = "SELECT ID FROM information_schema.PROCESSLIST WHERE DB = %s AND ID <> CONNECTION_ID()"
    args: list[Any] = [db]
    if running is not None:
        sql += " AND INFO RLIKE %s"
        args.append(running)
    return [int(r[0]) for r in execute(conn, sql, args)]


def kill(conn: Connection, ids: Sequence[int]) -> list[int]:
    """KILL each session; returns those that were still there to kill."""
    killed = []
    for cid in ids:
        try:
            execute(conn, f"KILL CONNECTION {int(cid)}")
            killed.append(cid)
        except pymysql.err.OperationalError as exc:
            if exc.args[0] != UNKNOWN_THREAD:  # it ended on its own meanwhile: nothing to kill
                raise
    return killed


class Poller(threading.Thread):
    """Calls ``step`` every ``interval`` seconds on its own thread until it returns True or ``stop`` is called.

    An exception in ``step`` ends the loop and is raised again by ``stop``, so a broken poller
    fails the test instead of silently observing nothing.
    """

    def __init__(self, step: Callable[[], bool], interval: float = 0.005) -> None:
        super().__init__(daemon=True)
        self.step = step
        self.interval = interval
        self.finished = False
        self.error: BaseException | None = None
        self._halt = threading.Event()

    def run(self) -> None:
        try:
            while not self._halt.is_set():
                if self.step():
                    self.finished = True
                    return
                self._halt.wait(self.interval)
        except BaseException as exc:
            self.error = exc

    def stop(self) -> None:
        self._halt.set()
        self.join(timeout=30)
        if self.error is not None:
            raise self.error


@contextmanager
def polling(step: Callable[[], bool], interval: float = 0.005) -> Iterator[Poller]:
    """A running Poller for the duration of the block (stopped, and its error raised, on exit)."""
    poller = Poller(step, interval)
    poller.start()
    try:
        yield poller
    finally:
        poller.stop()


def assert_json_lines(stderr: str) -> None:
    """Every stderr line of a CLI run is one JSON log event: no traceback, no "Exception ignored" noise.

    Python prints an exception raised in a ``__del__`` (pymysql's cursor and result clean-up on a
    dead socket) straight to stderr, bypassing the logger: ops tooling reading JSON lines chokes on it.
    """
    bad = []
    for line in stderr.splitlines():
        if "Traceback" in line or "Exception ignored" in line:
            bad.append(line)
            continue
        try:
            json.loads(line)
        except ValueError:
            bad.append(line)
    assert not bad, f"{len(bad)} stderr line(s) are not JSON log events:\n" + "\n".join(bad[:40])


class VanishingServer:
    """A TCP relay to the test server that can make the server vanish: ``cut()`` drops every relayed
    connection and refuses new ones (as a stopped or unreachable server does), ``restore()`` brings it
    back. Destinations reach the server through ``port`` to be cut off while others stay healthy."""

    def __init__(self, server: Server) -> None:
        self.server = server
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._open: list[socket.socket] = []
        self._lock = threading.Lock()
        self.down = False
        self._closed = False
        threading.Thread(target=self._accept, daemon=True, name="vanishing-accept").start()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            if self.down:
                client.close()  # refused: the client sees its connection closed at once
                continue
            upstream = socket.create_connection((self.server.host, self.server.port))
            with self._lock:
                self._open += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)

    def cut(self) -> None:
        self.down = True
        with self._lock:
            for s in self._open:
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)
                s.close()
            self._open = []

    def restore(self) -> None:
        self.down = False

    def close(self) -> None:
        self._closed = True
        self.cut()
        self._listener.close()


@contextmanager
def general_log(server: Server) -> Iterator[list[tuple[str, str]]]:
    """The server's general query log, on while the block runs; on exit the list holds what it logged
    (command type, statement). The log is server-wide, so a named lock keeps a test on another worker from
    switching it off or emptying it meanwhile."""
    admin = server.connect()
    entries: list[tuple[str, str]] = []
    try:
        assert execute(admin, "SELECT GET_LOCK('wormhole_test_general_log', 900)") == [(1,)]
        execute(admin, "SET GLOBAL log_output = 'TABLE'")
        execute(admin, "TRUNCATE TABLE mysql.general_log")
        execute(admin, "SET GLOBAL general_log = 'ON'")
        try:
            yield entries
        finally:
            execute(admin, "SET GLOBAL general_log = 'OFF'")
            entries.extend((str(kind), str(text)) for kind, text in execute(
                admin, "SELECT command_type, CONVERT(argument USING utf8mb4) FROM mysql.general_log"))
            execute(admin, "TRUNCATE TABLE mysql.general_log")
            execute(admin, "SELECT RELEASE_LOCK('wormhole_test_general_log')")
    finally:
        admin.close()


def logged_like(entries: list[tuple[str, str]], kinds: Sequence[str], pattern: str) -> list[str]:
    """The statements of ``kinds`` matching a SQL LIKE ``pattern`` (``%`` any text)."""
    regex = re.compile(".*".join(re.escape(part) for part in pattern.split("%")), re.DOTALL)
    return [text for kind, text in entries if kind in kinds and regex.fullmatch(text)]
