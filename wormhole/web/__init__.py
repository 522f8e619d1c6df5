"""The operations console: a web page and a JSON API over the task database, served by ``wormhole daemon --http``
and ``wormhole console`` (Starlette on uvicorn; docs/manual/console.md).

Modules: ``settings.py`` (what the console is started with, its tokens), ``security.py`` (the ASGI guard:
host, token, same origin, body size), ``views.py`` (the documents the API returns, every secret redacted),
``api.py`` (the endpoints and their table), ``openapi.py`` (the API description, from that table),
``server.py`` (uvicorn, in the daemon's thread or on its own), ``static/`` (the page: hand-written HTML, JS, CSS).
"""

from __future__ import annotations

from wormhole.web.settings import ConsoleSettings, Tokens

__all__ = ["ConsoleSettings", "Tokens"]
