"""The console's ASGI application: the API's routes, its OpenAPI document, the page's static files, all
behind the guard (:mod:`wormhole.web.security`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from wormhole.web.api import ENDPOINTS, ApiError, handler
from wormhole.web.openapi import openapi
from wormhole.web.security import Guard
from wormhole.web.settings import ConsoleSettings

STATIC = Path(__file__).with_name("static")


def create_app(settings: ConsoleSettings) -> Any:
    """The console for ``settings``, as an ASGI application (wrapped in its guard)."""
    document = openapi()

    async def openapi_json(_request: Request) -> Response:
        return JSONResponse(document)

    async def page(_request: Request) -> Response:
        return FileResponse(STATIC / "index.html", media_type="text/html")

    async def not_found(_request: Request) -> Response:
        return ApiError(404, "NOT_FOUND", "no such endpoint (GET /api/openapi.json lists them)").response()

    async def config(_request: Request) -> Response:
        return JSONResponse({"poll_s": settings.poll_s, "dirty_rows": settings.dirty_rows,
                             "reads_need_token": settings.reads_need_token})

    routes: list[Any] = [Route(e.path, handler(e, settings), methods=[e.method]) for e in ENDPOINTS]
    routes += [
        Route("/api/openapi.json", openapi_json, methods=["GET"]),
        Route("/api/config", config, methods=["GET"]),
        Route("/api/{rest:path}", not_found, methods=["GET", "POST", "PUT", "DELETE", "PATCH"]),
        Route("/", page, methods=["GET"]),
        Mount("/static", StaticFiles(directory=STATIC), name="static"),
    ]
    return Guard(Starlette(routes=routes), settings)
