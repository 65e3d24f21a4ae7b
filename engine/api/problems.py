"""Errors as RFC 9457 problem documents, and the gate every request passes first.

The gate (plain ASGI, outside FastAPI) checks the bearer token where one is required
(TCP), refuses a body over the limit before any of it reaches a route (a body with no
Content-Length is read up to the limit, then handed on), and turns an error no handler
took into a 500 problem logged once, never a crash of the runtime.
"""

from __future__ import annotations

import hmac
import json
import logging
from http import HTTPStatus
from typing import TYPE_CHECKING, Any

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from engine.api.client import ApiError
from engine.store import DiskFull

if TYPE_CHECKING:  # the gate and problem documents are Starlette's: the hook listener and
    from fastapi import FastAPI  # the console's start do not load FastAPI (~0.2 s)

log = logging.getLogger("agentdeck.api")
PROBLEM = "application/problem+json"


def problem(status: int, detail: str = "", **headers: str) -> JSONResponse:
    """A problem document for `status` with `detail`."""
    body = {"type": "about:blank", "title": HTTPStatus(status).phrase, "status": status,
            "detail": detail}  # fmt: skip
    return JSONResponse(body, status_code=status, media_type=PROBLEM, headers=headers or None)


def _where(loc: tuple[Any, ...]) -> str:
    return ".".join(str(part) for part in loc if part != "body") or "body"


def install_problem_handlers(api: FastAPI) -> None:
    """Every error the API answers with is a problem document."""
    from fastapi.exceptions import RequestValidationError

    @api.exception_handler(ApiError)
    async def api_error(request: Request, exc: ApiError) -> JSONResponse:
        return problem(exc.status, exc.detail)

    @api.exception_handler(DiskFull)
    async def disk_full(request: Request, exc: DiskFull) -> JSONResponse:
        return problem(507, f"the disk holding the room is full: {exc}")

    @api.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        reasons = "; ".join(
            f"{_where(e['loc'])}: {str(e['msg']).removeprefix('Value error, ')}"
            for e in exc.errors()
        )
        return problem(422, reasons)

    @api.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException) -> JSONResponse:
        detail = exc.detail if isinstance(exc.detail, str) else json.dumps(exc.detail)
        if exc.status_code == 404 and detail == "Not Found":
            detail = f"no route {request.method} {request.url.path}"
        return problem(exc.status_code, detail, **(exc.headers or {}))

    @api.exception_handler(Exception)
    async def crashed(request: Request, exc: Exception) -> JSONResponse:
        return problem(500, f"the runtime could not answer: {type(exc).__name__}: {exc}")


class Gate:
    """Token, body size and last-resort errors, in front of the API."""

    def __init__(self, app: ASGIApp, *, max_body: int, token: str | None = None) -> None:
        self.app, self.max_body = app, max_body
        self.token = token.encode() if token is not None else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope["headers"])
        if self.token is not None:
            given = headers.get(b"authorization", b"")
            scheme, _, secret = given.partition(b" ")
            if scheme.lower() != b"bearer" or not hmac.compare_digest(secret, self.token):
                detail = "this API needs `Authorization: Bearer <the room's server.token>`"
                await problem(401, detail, **{"WWW-Authenticate": "Bearer"})(scope, receive, send)
                return
        length = headers.get(b"content-length")
        if length is not None and (not length.isdigit() or int(length) > self.max_body):
            await problem(413, f"the body is over {self.max_body} bytes")(scope, receive, send)
            return
        if length is None and scope["method"] in ("POST", "PUT", "PATCH"):
            body = await self._read(receive)
            if body is None:
                await problem(413, f"the body is over {self.max_body} bytes")(scope, receive, send)
                return
            receive = _replay(body, receive)
        started = False

        async def watch(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, watch)
        except Exception:  # the handler above answered (or the client left); log it once
            log.exception("the API failed on %s %s", scope["method"], scope["path"])
            if not started:
                await problem(500, "the runtime could not answer")(scope, receive, send)

    async def _read(self, receive: Receive) -> bytes | None:
        """The whole body, or None once it passes the limit."""
        parts: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return b"".join(parts)
            part = message.get("body", b"")
            size += len(part)
            if size > self.max_body:
                return None
            parts.append(part)
            if not message.get("more_body", False):
                return b"".join(parts)


def _replay(body: bytes, receive: Receive) -> Receive:
    sent = False

    async def again() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return again
