"""Connections the API and the hook listener keep: idle ones cannot shut the door.

uvicorn counts every open connection towards `limit_concurrency` and never times out one
that sends nothing, so 260 connections that never sent a byte made every real request a
503 for as long as they stayed, on the TCP API before any token check. Here:

- a connection must send a request's headers within HEADER_TIMEOUT of opening, or of its
  last response (slowly, a byte at a time, counts as not sending them);
- past MAX_CONNECTIONS open, a new connection makes room by closing the oldest idle one (no
  request in progress), and past PER_CLIENT from one address (TCP), that address's oldest
  idle one, so one sender cannot crowd the others out; with no idle one to close, the new
  connection is closed;
- 503 is answered only when MAX_REQUESTS requests are in progress (uvicorn's
  `limit_concurrency`, which also counts connections: they stay well under it).

Memory stays bounded (MAX_CONNECTIONS connections, MAX_REQUESTS requests), and real senders
get through while idle connections come and go. The Unix socket has its own server and
counts, so agent.sock keeps working whatever the TCP listeners face.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from uvicorn.protocols.http.h11_impl import H11Protocol

HEADER_TIMEOUT = 10.0  # seconds a connection has to send a request's headers
MAX_CONNECTIONS = 256  # open at once, per listener
PER_CLIENT = 64  # open at once from one address, per TCP listener
MAX_REQUESTS = 2 * MAX_CONNECTIONS  # in progress at once, per listener; past it, 503


class Connection(H11Protocol):
    """uvicorn's h11 protocol with a header deadline and room made from idle connections."""

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.idle_since: float | None = None  # waiting for a request's headers since
        self._deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._idle()
        peer = self.client[0] if self.client else None
        if len(self.connections) > MAX_CONNECTIONS:
            self._make_room(lambda c: True)
        if peer is not None and sum(_peer(c) == peer for c in self.connections) > PER_CLIENT:
            self._make_room(lambda c: _peer(c) == peer)

    def data_received(self, data: bytes) -> None:
        cycle = self.cycle
        super().data_received(data)
        if self.cycle is not cycle:  # a request's headers came in: it is in progress
            self.idle_since = None
            self._cancel()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing():
            self._idle()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel()
        super().connection_lost(exc)

    def _idle(self) -> None:
        self.idle_since = time.monotonic()
        self._cancel()
        self._deadline = self.loop.call_later(HEADER_TIMEOUT, self._too_slow)

    def _too_slow(self) -> None:
        if self.idle_since is not None and not self.transport.is_closing():
            self.transport.close()

    def _cancel(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _make_room(self, among: Any) -> None:
        """Close the oldest idle connection `among` picks (this one, when none is idle)."""
        idle = [c for c in self.connections
                if isinstance(c, Connection) and c is not self and c.idle_since is not None
                and not c.transport.is_closing() and among(c)]  # fmt: skip
        oldest = min(idle, key=lambda c: c.idle_since or 0.0, default=self)
        oldest.transport.close()


def _peer(connection: Any) -> str | None:
    client = getattr(connection, "client", None)
    return client[0] if client else None
