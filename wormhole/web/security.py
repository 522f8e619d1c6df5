"""The console's guard, in front of every request (a plain ASGI middleware, so no endpoint can forget it).

1. The ``Host`` header must name this machine when the console listens on loopback (a page elsewhere that
   renames itself to 127.0.0.1 by DNS, "DNS rebinding", gets 403, not the API).
2. An API request carries its token in a header, ``Authorization: Bearer TOKEN`` or ``X-Wormhole-Token``,
   never in a cookie or the URL: a browser adds neither to a request another site makes, so an action
   cannot be forged from another page (CSRF). Every action needs one; when the console listens beyond
   loopback, every API request does (401 without, 403 with a wrong one).
3. An action from a browser must come from the console's own origin (``Origin`` and ``Sec-Fetch-Site``).
4. A body over ``max_body_bytes`` is refused (413) before any endpoint reads it.

Every response gets headers that keep the page to its own scripts (Content-Security-Policy) and the API
out of caches.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any
from urllib.parse import urlsplit

from wormhole.web.settings import ConsoleSettings, is_loopback

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]

READS = frozenset({"GET", "HEAD"})
TOKEN_HEADER = "x-wormhole-token"
ACTOR_HEADER = "x-wormhole-actor"
PUBLIC_API = frozenset({"/api/openapi.json"})
"""API paths that hold no data: readable without a token wherever the console listens."""
SECURITY_HEADERS = (
    (b"content-security-policy", b"default-src 'self'; img-src 'self' data:; frame-ancestors 'none';"
                                 b" base-uri 'none'; form-action 'none'"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
)


def token_of(headers: dict[str, str]) -> str | None:
    """The token a request carries: ``Authorization: Bearer TOKEN`` or ``X-Wormhole-Token: TOKEN``."""
    auth = headers.get("authorization", "")
    if auth[:7].lower() == "bearer ":
        return auth[7:].strip()
    return headers.get(TOKEN_HEADER) or None


def _host_name(host: str) -> str:
    return (urlsplit(f"//{host}").hostname or "") if host else ""


def same_origin(headers: dict[str, str]) -> bool:
    """Whether a browser says the request comes from the page's own origin (a client that is no browser
    sends neither header: its token is what counts)."""
    if headers.get("sec-fetch-site", "same-origin") not in ("same-origin", "none"):
        return False
    origin = headers.get("origin")
    if origin is None:
        return True
    parts = urlsplit(origin)
    return parts.netloc.lower() == headers.get("host", "").lower()


class Guard:
    """The ASGI middleware of the module docstring around ``app``."""

    def __init__(self, app: App, settings: ConsoleSettings) -> None:
        self.app = app
        self.settings = settings

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        refused = self._refused(scope, headers)
        if refused is not None:
            await _reply(send, *refused)
            return
        if scope["method"] not in READS:
            body = await _read_body(receive, self.settings.max_body_bytes)
            if body is None:
                await _reply(send, 413, "BODY_TOO_LARGE",
                             f"the request body is larger than {self.settings.max_body_bytes} bytes")
                return
            receive = _replay(body)
        await self.app(scope, receive, _with_headers(send, scope["path"].startswith("/api/")))

    def _refused(self, scope: Scope, headers: dict[str, str]) -> tuple[int, str, str] | None:
        """(status, code, message) when the request goes no further; records its actor on ``scope``."""
        if is_loopback(self.settings.host) and not is_loopback(_host_name(headers.get("host", ""))):
            return 403, "HOST_REFUSED", "this console answers requests for localhost only"
        length = headers.get("content-length", "0")
        if not length.isdigit() or int(length) > self.settings.max_body_bytes:
            return 413, "BODY_TOO_LARGE", f"the request body is larger than {self.settings.max_body_bytes} bytes"
        path, action = scope["path"], scope["method"] not in READS
        if not path.startswith("/api/") or (path in PUBLIC_API and not action):
            return None
        if not action and not self.settings.reads_need_token:
            scope.setdefault("state", {})["actor"] = None
            return None
        given = token_of(headers)
        if given is None:
            what = "an action" if action else "a request to a console listening beyond this machine"
            return 401, "TOKEN_REQUIRED", f"{what} needs the console token (Authorization: Bearer TOKEN)"
        holder = self.settings.tokens.holder(given)
        if holder is None:
            return 403, "TOKEN_REFUSED", "the console token is not one this console accepts"
        if action and not same_origin(headers):
            return 403, "CROSS_ORIGIN", "an action must come from the console's own page"
        scope.setdefault("state", {})["actor"] = _actor(holder, headers, scope)
        return None


def _actor(holder: str, headers: dict[str, str], scope: Scope) -> str:
    """Who did it, as the action table records it: the token's holder, the name the page was given, the
    client's address (``ann (console) from 127.0.0.1``)."""
    client = scope.get("client")
    where = f" from {client[0]}" if client else ""
    named = "".join(ch for ch in headers.get(ACTOR_HEADER, "")[:64] if ch.isprintable()).strip()
    return f"{named} ({holder}){where}" if named else f"{holder}{where}"


async def _read_body(receive: Receive, limit: int) -> bytes | None:
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            break
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


def _replay(body: bytes) -> Receive:
    sent = False

    async def receive() -> Message:
        nonlocal sent
        if sent:
            return {"type": "http.disconnect"}
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    return receive


def _with_headers(send: Send, api: bool) -> Send:
    async def wrapped(message: Message) -> None:
        if message["type"] == "http.response.start":
            extra = [*SECURITY_HEADERS, *([(b"cache-control", b"no-store")] if api else [])]
            message["headers"] = [*message.get("headers", []), *extra]
        await send(message)

    return wrapped


async def _reply(send: Send, status: int, code: str, message: str) -> None:
    body = json.dumps({"error": message, "code": code}).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                            *SECURITY_HEADERS]})
    await send({"type": "http.response.body", "body": body})
