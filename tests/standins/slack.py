"""A Slack Web API stand-in (https://api.slack.com/methods/chat.postMessage).

`POST /api/chat.postMessage` with `Authorization: Bearer <token>` and a JSON or form body.
Like Slack it answers HTTP 200 with `{"ok": false, "error": "..."}` for a bad token, an
unknown channel or a missing text, and HTTP 429 with `Retry-After` when rate limited.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

LIMIT = 40_000


@dataclass
class SlackStandin:
    """A workspace's side of chat.postMessage: the posts it took."""

    token: str
    channels: set[str] | None = None  # the channels the bot is in; None: any
    posts: list[dict[str, Any]] = field(default_factory=list)
    _failures: list[Response] = field(default_factory=list)
    _hang: int = 0
    _closing: asyncio.Event = field(default_factory=asyncio.Event)

    def error_next(self, error: str) -> None:
        """The next post is answered HTTP 200 `{"ok": false, "error": error}`."""
        self._failures.append(JSONResponse({"ok": False, "error": error}))

    def rate_limit_next(self, retry_after: int) -> None:
        """The next post is answered HTTP 429 with `Retry-After`."""
        self._failures.append(
            JSONResponse(
                {"ok": False, "error": "ratelimited"},
                status_code=429,
                headers={"Retry-After": str(retry_after)},
            )  # fmt: skip
        )

    def status_next(self, status: int) -> None:
        """The next post is answered with a bare HTTP `status`."""
        self._failures.append(PlainTextResponse("upstream trouble", status_code=status))

    def hang_next(self) -> None:
        """The next post is held until the stand-in closes."""
        self._hang += 1

    def close(self) -> None:
        """End every request the stand-in is holding."""
        self._closing.set()

    def app(self) -> Starlette:
        """The ASGI app."""
        return Starlette(routes=[Route("/api/chat.postMessage", self._post, methods=["POST"])])

    async def _post(self, request: Request) -> Response:
        if self._hang:
            self._hang -= 1
            await self._closing.wait()
            return PlainTextResponse("closing", status_code=503)
        auth = request.headers.get("authorization", "")
        if not auth.startswith("Bearer "):
            return JSONResponse({"ok": False, "error": "not_authed"})
        if auth.removeprefix("Bearer ") != self.token:
            return JSONResponse({"ok": False, "error": "invalid_auth"})
        if self._failures:
            return self._failures.pop(0)
        if request.headers.get("content-type", "").startswith("application/json"):
            try:
                params = json.loads(await request.body())
            except ValueError:
                return JSONResponse({"ok": False, "error": "invalid_json"})
        else:
            params = dict(await request.form())
        if not isinstance(params, dict):
            return JSONResponse({"ok": False, "error": "invalid_arguments"})
        channel, text = params.get("channel"), params.get("text")
        if not channel or (self.channels is not None and channel not in self.channels):
            return JSONResponse({"ok": False, "error": "channel_not_found"})
        if not isinstance(text, str) or not text:
            return JSONResponse({"ok": False, "error": "no_text"})
        if len(text) > LIMIT:
            return JSONResponse({"ok": False, "error": "msg_too_long"})
        self.posts.append(params)
        ts = f"1700000000.{len(self.posts):06d}"
        message = {"type": "message", "text": text, "ts": ts, "bot_id": "B1"}
        if "thread_ts" in params:
            message["thread_ts"] = params["thread_ts"]
        return JSONResponse({"ok": True, "channel": channel, "ts": ts, "message": message})
