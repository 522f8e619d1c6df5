"""Serving the console with uvicorn: in a thread of ``wormhole daemon --http`` (the daemon keeps its signals),
or on its own for ``wormhole console`` (uvicorn stops on SIGTERM/SIGINT)."""

from __future__ import annotations

import threading
import time
from typing import Any

import uvicorn

from wormhole.web.app import create_app
from wormhole.web.settings import ConsoleSettings

START_TIMEOUT_S = 10.0


def _server(settings: ConsoleSettings) -> uvicorn.Server:
    # log_config=None: the process's structlog set-up stays as it is; access lines would log every poll.
    config = uvicorn.Config(create_app(settings), host=settings.host, port=settings.port, log_config=None,
                            access_log=False, lifespan="off", server_header=False,
                            limit_concurrency=64, timeout_keep_alive=5)
    return uvicorn.Server(config)


def bound_port(server: uvicorn.Server) -> int:
    """The port the server listens on (the one the OS chose for port 0)."""
    for listening in server.servers:
        for sock in listening.sockets:
            return int(sock.getsockname()[1])
    return 0


class ConsoleThread:
    """The console in a thread of its own (the daemon's): :meth:`start`, then :meth:`close`."""

    def __init__(self, settings: ConsoleSettings) -> None:
        self.settings = settings
        self._server = _server(settings)
        self._thread = threading.Thread(target=self._server.run, daemon=True, name="console")
        self.port = 0

    def start(self) -> int:
        """Serve; the port once listening. OSError when it cannot (the port in use)."""
        self._thread.start()
        deadline = time.monotonic() + START_TIMEOUT_S
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise OSError(f"the console cannot listen on {self.settings.host}:{self.settings.port}")
            time.sleep(0.02)
        self.port = bound_port(self._server)
        return self.port

    def close(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10.0)


def serve(settings: ConsoleSettings, logger: Any) -> int:
    """``wormhole console``: serve until SIGTERM or SIGINT; the exit code."""
    server = _server(settings)
    original = server.startup

    async def startup(sockets: Any = None) -> None:
        await original(sockets)
        if server.started:
            logger.info("console.serving", host=settings.host, port=bound_port(server),
                        token_file=str(settings.tokens.made) if settings.tokens.made else None,
                        reads_open=not settings.reads_need_token)  # a key naming "token" would be redacted

    server.startup = startup  # type: ignore[method-assign]
    try:
        server.run()
    except SystemExit:  # uvicorn exits when it cannot listen (it logged why)
        return 203
    return 0 if server.started else 203
