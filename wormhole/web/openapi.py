"""The API's OpenAPI 3.1 description, made from the endpoint table (:data:`wormhole.web.api.ENDPOINTS`)."""

from __future__ import annotations

import re
from typing import Any

from wormhole import __version__
from wormhole.web.api import ENDPOINTS

ERROR = {"type": "object", "required": ["error", "code"], "properties": {
    "error": {"type": "string"}, "code": {"type": "string"},
    "problems": {"type": "array", "items": {"type": "string"}}}}
COMMON_ANSWERS = {401: "no token (an action, or a console listening beyond loopback)", 403: "wrong token, or a page "
                  "of another origin", 413: "body too large"}


def _operation(endpoint: Any) -> dict[str, Any]:
    action = endpoint.method != "GET"
    params = [{"name": name, "in": "path", "required": True, "schema": {"type": "integer"}}
              for name in re.findall(r"{(\w+)}", endpoint.path)]
    params += [{"name": name, "in": "query", "required": False, "schema": {"type": kind}, "description": text}
               for name, kind, text in endpoint.query]
    answers = {200: "OK", **endpoint.answers, **COMMON_ANSWERS, **({400: "bad JSON or body"} if action else {})}
    op: dict[str, Any] = {
        "summary": endpoint.summary, "operationId": endpoint.work.__name__ if endpoint.work.__name__ != "<lambda>"
        else endpoint.path.rsplit("/", 1)[-1] + "_task",
        "parameters": params,
        "responses": {str(code): {"description": text, "content": {"application/json": {
            "schema": {"$ref": "#/components/schemas/Error"} if code >= 400 else {"type": "object"}}}}
            for code, text in sorted(answers.items())},
        "security": [{"bearer": []}, {"header": []}] if action else [{}, {"bearer": []}, {"header": []}],
    }
    if endpoint.body is not None:
        op["requestBody"] = {"required": True, "content": {"application/json": {"schema": endpoint.body}}}
    return op


def openapi() -> dict[str, Any]:
    paths: dict[str, dict[str, Any]] = {}
    for endpoint in ENDPOINTS:
        paths.setdefault(endpoint.path, {})[endpoint.method.lower()] = _operation(endpoint)
    return {
        "openapi": "3.1.0",
        "info": {"title": "wormhole console API", "version": __version__,
                 "description": "Tasks, runs, live progress, rejected rows and actions of a wormhole task database. "
                                "Actions always need the console token; reads need it when the console listens "
                                "beyond loopback (docs/manual/console.md)."},
        "paths": paths,
        "components": {"schemas": {"Error": ERROR}, "securitySchemes": {
            "bearer": {"type": "http", "scheme": "bearer"},
            "header": {"type": "apiKey", "in": "header", "name": "X-Wormhole-Token"}}},
    }
