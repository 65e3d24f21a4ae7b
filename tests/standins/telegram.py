"""A Telegram Bot API stand-in (https://core.telegram.org/bots/api): getUpdates, sendMessage.

Requests go to `/bot<token>/<method>`, with parameters in the query string, a JSON body or
a form; answers are `{"ok": true, "result": ...}` or `{"ok": false, "error_code": ...,
"description": ..., "parameters": {...}}` with the error code as the HTTP status.
getUpdates keeps the documented offset semantics: updates below the offset are confirmed
and forgotten, and a `timeout` holds the request until an update arrives.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from typing import Any

import anyio
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

LIMIT = 4096


def _error(code: int, description: str, retry_after: int | None = None) -> JSONResponse:
    body: dict[str, Any] = {"ok": False, "error_code": code, "description": description}
    if retry_after is not None:
        body["parameters"] = {"retry_after": retry_after}
    return JSONResponse(body, status_code=code)


@dataclass
class TelegramStandin:
    """One bot's side of the Bot API: updates to hand out, messages it was sent."""

    token: str
    sent: list[dict[str, Any]] = field(default_factory=list)  # sendMessage parameters
    polls: list[dict[str, Any]] = field(default_factory=list)  # getUpdates parameters
    blocked: set[int] = field(default_factory=set)  # chats that blocked the bot (403)
    _queue: list[Any] = field(default_factory=list)
    _next_id: int = 100
    _failures: dict[str, list[list[Any]]] = field(default_factory=dict)  # [after, response]
    _hang: set[str] = field(default_factory=set)
    _arrived: asyncio.Event = field(default_factory=asyncio.Event)
    _closing: asyncio.Event = field(default_factory=asyncio.Event)

    # What a test does

    def message(self, chat_id: int, text: str, user: str = "ann", **extra: Any) -> int:
        """A user's text message arrives; returns its update_id."""
        return self.update({
            "message": {
                "message_id": self._next_id, "date": 1_700_000_000,
                "chat": {"id": chat_id, "type": "private"},
                "from": {"id": 7, "is_bot": False, "first_name": user.title(), "username": user},
                "text": text, **extra,
            }
        })  # fmt: skip

    def update(self, update: dict[str, Any]) -> int:
        """Any update arrives (its update_id given, else the next); returns its id."""
        update = {"update_id": self._next_id, **update}
        self._next_id = max(self._next_id, update["update_id"]) + 1
        self._queue.append(update)
        self._arrived.set()
        return int(update["update_id"])

    def raw(self, item: Any) -> None:
        """A result item as is (malformed, for tests), handed out once."""
        self._queue.append(_Raw(item))
        self._arrived.set()

    def fail_next(self, method: str, response: Response, after: int = 0) -> None:
        """The call of `method` after the next `after` ones gets `response`."""
        self._failures.setdefault(method, []).append([after, response])

    def too_many(self, method: str, retry_after: int, after: int = 0) -> None:
        """The call of `method` after the next `after` ones is refused with 429."""
        text = f"Too Many Requests: retry after {retry_after}"
        self.fail_next(method, _error(429, text, retry_after), after)

    def hang_next(self, method: str) -> None:
        """The next call of `method` is held until the stand-in closes."""
        self._hang.add(method)

    def close(self) -> None:
        """End every request the stand-in is holding."""
        self._closing.set()
        self._arrived.set()

    def app(self) -> Starlette:
        """The ASGI app."""
        return Starlette(
            routes=[Route("/bot{token}/{method}", self._call, methods=["GET", "POST"])]
        )

    # The API

    async def _call(self, request: Request) -> Response:
        if request.path_params["token"] != self.token:
            return _error(401, "Unauthorized")
        method = request.path_params["method"]
        try:
            params = await _params(request)
        except ValueError:
            return _error(400, "Bad Request: can't parse request parameters")
        if method in self._hang:
            self._hang.discard(method)
            await self._closing.wait()
            return _error(500, "Internal Server Error")
        failures = self._failures.get(method)
        if failures:
            if failures[0][0] == 0:
                return failures.pop(0)[1]  # type: ignore[no-any-return]
            failures[0][0] -= 1
        if method == "getUpdates":
            return await self._get_updates(params)
        if method == "sendMessage":
            return self._send_message(params)
        return _error(404, "Not Found")

    async def _get_updates(self, params: dict[str, Any]) -> Response:
        self.polls.append(params)
        try:
            offset = int(params["offset"]) if params.get("offset") is not None else None
            timeout = int(params.get("timeout") or 0)
            limit = int(params.get("limit") or 100)
        except (TypeError, ValueError):
            return _error(400, "Bad Request: invalid parameters")
        allowed = params.get("allowed_updates")
        if isinstance(allowed, str):
            allowed = json.loads(allowed)
        if offset is not None:  # confirms every update below it
            self._queue = [
                u for u in self._queue if isinstance(u, _Raw) or u["update_id"] >= offset
            ]
        with anyio.move_on_after(timeout):
            while not self._queue and not self._closing.is_set():
                self._arrived.clear()
                await self._arrived.wait()
        result: list[Any] = []
        for item in list(self._queue[:limit]):
            if isinstance(item, _Raw):
                self._queue.remove(item)
                result.append(item.value)
            elif not allowed or any(k in item for k in allowed):
                result.append(item)
        return JSONResponse({"ok": True, "result": result})

    def _send_message(self, params: dict[str, Any]) -> Response:
        chat_id, text = params.get("chat_id"), params.get("text")
        if chat_id in (None, ""):
            return _error(400, "Bad Request: chat_id is empty")
        if not isinstance(text, str) or not text.strip():
            return _error(400, "Bad Request: message text is empty")
        if len(text.encode("utf-16-le")) // 2 > LIMIT:
            return _error(400, "Bad Request: message is too long")
        try:
            chat = int(chat_id)
        except (TypeError, ValueError):
            return _error(400, "Bad Request: chat not found")
        if chat in self.blocked:
            return _error(403, "Forbidden: bot was blocked by the user")
        self.sent.append(params)
        message = {"message_id": len(self.sent), "date": 1_700_000_000,
                   "chat": {"id": chat, "type": "private"}, "text": text}  # fmt: skip
        return JSONResponse({"ok": True, "result": message})


@dataclass
class _Raw:
    value: Any


async def _params(request: Request) -> dict[str, Any]:
    """The parameters of a call, from the query string, a JSON body or a form."""
    params: dict[str, Any] = dict(request.query_params)
    kind = request.headers.get("content-type", "")
    if kind.startswith("application/json"):
        body = json.loads(await request.body() or b"{}")
        if not isinstance(body, dict):
            raise ValueError("not an object")
        params.update(body)
    elif kind.startswith(("application/x-www-form-urlencoded", "multipart/form-data")):
        params.update(dict(await request.form()))
    return params
