"""A webhook receiver: records each POST, checks its signature, answers as told."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
from dataclasses import dataclass, field

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route


@dataclass(frozen=True)
class Received:
    """One POST the receiver got."""

    body: bytes
    headers: dict[str, str]
    signed: bool  # the signature header matched the body


@dataclass
class Receiver:
    """Takes POSTs at `/hook`, signed with `secret` in `signature_header`."""

    secret: str
    signature_header: str = "X-Hub-Signature-256"
    received: list[Received] = field(default_factory=list)
    _answers: list[Response] = field(default_factory=list)
    _hang: int = 0
    _closing: asyncio.Event = field(default_factory=asyncio.Event)

    def answer_next(self, status: int, retry_after: str | None = None) -> None:
        """The next POST is answered `status` (with `Retry-After` if given)."""
        headers = {"Retry-After": retry_after} if retry_after is not None else {}
        self._answers.append(JSONResponse({"status": status}, status, headers=headers))

    def hang_next(self) -> None:
        """The next POST is held until the receiver closes."""
        self._hang += 1

    def close(self) -> None:
        """End every request the receiver is holding."""
        self._closing.set()

    def app(self) -> Starlette:
        """The ASGI app."""
        return Starlette(routes=[Route("/hook", self._hook, methods=["POST"])])

    async def _hook(self, request: Request) -> Response:
        body = await request.body()
        if self._hang:
            self._hang -= 1
            await self._closing.wait()
            return JSONResponse({"status": 503}, 503)
        given = request.headers.get(self.signature_header, "")
        expected = "sha256=" + hmac.new(self.secret.encode(), body, hashlib.sha256).hexdigest()
        signed = hmac.compare_digest(given.encode(), expected.encode())
        self.received.append(Received(body, dict(request.headers), signed))
        if self._answers:
            return self._answers.pop(0)
        if not signed:
            return JSONResponse({"error": "bad signature"}, 401)
        return JSONResponse({"ok": True}, 200)
