"""Speed limits in Spark mode: the task's one Throttle stays on the driver, behind a token server.

Executors are separate Python processes (on a cluster, separate machines), so they cannot share the
driver's lock. The driver serves its :class:`~wormhole.exchange.throttle.Throttle` on a TCP socket
(:class:`TokenServer`, bound to the address executors reach the driver at, ``spark.driver.host``);
a picklable :class:`TokenClient` travels in the read stage's closure. :func:`throttled` adds that
stage to the source DataFrame: it cuts Arrow batches into at most ``batch_rows`` rows, estimates
their bytes as local mode does (the first row's estimate times the rows), asks the driver and
yields the batch once the driver answers. The driver's handler waits on the throttle itself (on the
server's stop signal, never under a lock), so the wait, the rate and the stop are exactly local
mode's: stopping the server ends every wait at once and the executors' reads fail as stopped.

Protocol, one line each way per batch: the client sends its run's token once, then
``"<rows> <bytes>\\n"``; the server answers ``go`` or ``stop``.
"""

from __future__ import annotations

import secrets
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame

from wormhole.errors import ReadError, TaskAborted
from wormhole.exchange.exchanger import estimate_row_bytes
from wormhole.exchange.throttle import Throttle
from wormhole.log import Logger

_GO, _STOP = b"go\n", b"stop\n"
_LOOPBACK = "127.0.0.1"


@dataclass(frozen=True, slots=True)
class TokenClient:
    """How an executor reaches the driver's throttle (picklable: it travels in a Spark closure)."""

    host: str
    port: int
    token: str

    def connect(self) -> TokenConnection:
        return TokenConnection(self)


class TokenConnection:
    """One read task's connection to the driver's throttle."""

    def __init__(self, client: TokenClient) -> None:
        where = f"{client.host}:{client.port}"
        try:
            self._sock = socket.create_connection((client.host, client.port), timeout=30)
        except OSError as exc:
            raise ReadError(f"the speed limit's token server on the driver ({where}) is unreachable "
                            f"from this executor: {exc}") from exc
        self._sock.settimeout(None)  # a wait may be long: the driver answers when the batch may go
        self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._reply = self._sock.makefile("rb")
        self._sock.sendall(client.token.encode() + b"\n")

    def acquire(self, rows: int, nbytes: int) -> None:
        """Block until the driver lets ``rows`` rows of ``nbytes`` bytes go; raise when the task stopped."""
        try:
            self._sock.sendall(f"{rows} {nbytes}\n".encode())
            answer = self._reply.readline()
        except OSError:
            answer = b""
        if answer != _GO:
            raise TaskAborted("the task stopped: its speed limit's token server stopped", reason="stopped")

    def close(self) -> None:
        self._reply.close()
        self._sock.close()


class TokenServer:
    """The driver's side: one thread accepting, one per connected read task waiting on the throttle."""

    def __init__(self, throttle: Throttle, host: str | None, log: Logger) -> None:
        self._throttle = throttle
        self._log = log
        self._stop = threading.Event()
        self._lock = threading.Lock()  # guards the set of open connections, never held while waiting
        self._conns: set[socket.socket] = set()
        self._served = 0
        self._token = secrets.token_hex(16)
        self._listener, self.host = _listen(host or _LOOPBACK, log)
        self.port: int = self._listener.getsockname()[1]
        self._listener.settimeout(0.25)  # accept() wakes up to notice a stop
        threading.Thread(target=self._accept, daemon=True, name="throttle-server").start()
        log.info("throttle.server_started", host=self.host, port=self.port, record_limit=throttle.record,
                 byte_limit=throttle.byte)

    @property
    def client(self) -> TokenClient:
        return TokenClient(self.host, self.port, self._token)

    def stop(self) -> None:
        """End every wait at once and close the server; does not block (a signal handler may call it)."""
        if self._stop.is_set():
            return
        self._stop.set()
        with self._lock:
            conns = list(self._conns)
        try:
            self._listener.shutdown(socket.SHUT_RDWR)  # wakes accept() (Linux)
        except OSError:
            pass
        self._listener.close()  # the port is free at once: no new read task gets in
        for conn in conns:
            try:
                conn.shutdown(socket.SHUT_RDWR)  # a handler blocked reading its next request wakes
            except OSError:
                pass
        self._log.info("throttle.server_stopped", port=self.port, connections=self._served,
                       waited_s=round(self._throttle.waited_s, 3))

    def _accept(self) -> None:
        with self._listener:
            while not self._stop.is_set():
                try:
                    conn, _ = self._listener.accept()
                except TimeoutError:
                    continue
                except OSError:
                    break
                with self._lock:
                    self._conns.add(conn)
                    self._served += 1
                threading.Thread(target=self._serve, args=(conn,), daemon=True, name="throttle-conn").start()

    def _serve(self, conn: socket.socket) -> None:
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            with conn, conn.makefile("rb") as requests:
                if requests.readline().strip() != self._token.encode():
                    return  # not one of this run's read tasks
                self._log.debug("throttle.reader_joined")
                for line in requests:
                    rows, nbytes = (int(v) for v in line.split())
                    self._throttle.acquire(rows, nbytes, self._stop)
                    conn.sendall(_STOP if self._stop.is_set() else _GO)
        except (OSError, ValueError) as exc:
            if not self._stop.is_set():
                self._log.warning("throttle.connection_failed", error=str(exc)[:200])
        finally:
            with self._lock:
                self._conns.discard(conn)


def _listen(host: str, log: Logger) -> tuple[socket.socket, str]:
    try:
        return socket.create_server((host, 0)), host
    except OSError as exc:
        if host == _LOOPBACK:
            raise
        # Local masters still reach the loopback address; a cluster's executors would not.
        log.warning("throttle.bind_failed", host=host, error=str(exc), fallback=_LOOPBACK)
        return socket.create_server((_LOOPBACK, 0)), _LOOPBACK


def throttled(frame: DataFrame, client: TokenClient, batch_rows: int) -> DataFrame:
    """``frame`` read at the pace the driver's throttle sets (same rows, same schema)."""

    def pace(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        conn: TokenConnection | None = None  # opened at the first batch: an empty partition asks nothing
        try:
            for batch in batches:
                for start in range(0, batch.num_rows, batch_rows):
                    part = batch.slice(start, batch_rows)
                    if conn is None:
                        conn = client.connect()
                    conn.acquire(part.num_rows, estimate_row_bytes(_first_row(part)) * part.num_rows)
                    yield part
        finally:
            if conn is not None:
                conn.close()

    return frame.mapInArrow(pace, frame.schema)


def _first_row(batch: pa.RecordBatch) -> tuple[Any, ...]:
    return tuple(batch.column(i)[0].as_py() for i in range(batch.num_columns))
