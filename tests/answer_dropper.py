"""A TCP proxy in front of a real database server that loses one statement's answer: the statement reaches
the server and runs, and the client's connection is cut before the answer comes back, as a network failure
after a COMMIT or a RENAME was sent would do."""

from __future__ import annotations

import socket
import threading
from types import TracebackType


class AnswerDropper:
    """Forwards 127.0.0.1:``port`` to ``host``:``upstream``. Once a client packet holds ``trigger`` (while
    armed), that packet is sent on and the connection is cut instead of passing the server's answer back;
    with ``forward`` False the packet is dropped too (the statement never reaches the server)."""

    def __init__(self, host: str, upstream: int, trigger: bytes, *, forward: bool = True) -> None:
        self.target = (host, upstream)
        self.trigger = trigger
        self.forward = forward
        self.armed = threading.Event()
        self.fired = threading.Event()
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self.listener.getsockname()[1])
        threading.Thread(target=self._accept, daemon=True).start()

    def __enter__(self) -> AnswerDropper:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.listener.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:  # closed
                return
            server = socket.create_connection(self.target)
            cut = threading.Event()
            threading.Thread(target=self._upstream, args=(client, server, cut), daemon=True).start()
            threading.Thread(target=self._downstream, args=(server, client, cut), daemon=True).start()

    def _upstream(self, client: socket.socket, server: socket.socket, cut: threading.Event) -> None:
        try:
            while data := client.recv(65536):
                if self.armed.is_set() and self.trigger in data:
                    self.armed.clear()
                    cut.set()  # before the server can answer: the answer is never passed back
                    self.fired.set()
                    if not self.forward:
                        break
                server.sendall(data)
        except OSError:
            pass
        finally:
            if not cut.is_set() or not self.forward:
                _close(server)
                _close(client)

    def _downstream(self, server: socket.socket, client: socket.socket, cut: threading.Event) -> None:
        try:
            while data := server.recv(65536):
                if cut.is_set():  # the statement ran: its answer is dropped with the connection
                    break
                client.sendall(data)
        except OSError:
            pass
        finally:
            _close(client)
            _close(server)


def _close(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    sock.close()
