"""Stand-ins for the services channels talk to, served on loopback by uvicorn.

Each is a Starlette app written from the service's documented wire format; `serve` runs
one in the test's own event loop on 127.0.0.1 at a free port and yields its base URL.
"""

from __future__ import annotations

import contextlib
import socket
from collections.abc import AsyncIterator, Iterator
from typing import Protocol

import anyio
import uvicorn

from tests.wait import until


class _Server(uvicorn.Server):
    """uvicorn inside the test process: the test keeps its signal handling."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


class Standin(Protocol):
    """A stand-in: its ASGI app, and `close` to end the requests it is holding."""

    def app(self) -> object: ...

    def close(self) -> None: ...


@contextlib.asynccontextmanager
async def running(standin: Standin) -> AsyncIterator[str]:
    """Serve `standin` until the block exits; yields its base URL."""
    async with serve(standin.app()) as url:
        try:
            yield url
        finally:
            standin.close()


@contextlib.asynccontextmanager
async def serve(app: object) -> AsyncIterator[str]:
    """Serve `app` on 127.0.0.1 until the block exits; yields `http://127.0.0.1:<port>`."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)  # TCP_NODELAY
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    port = sock.getsockname()[1]
    config = uvicorn.Config(
        app,  # type: ignore[arg-type]
        lifespan="off", log_config=None, access_log=False, http="h11", ws="none",
        timeout_graceful_shutdown=2,
    )  # fmt: skip
    server = _Server(config)
    with sock:  # closed however the block ends: a failed test leaks no listening socket
        async with anyio.create_task_group() as tg:
            tg.start_soon(server.serve, [sock])
            await until(lambda: server.started, "the stand-in's server started")
            try:
                yield f"http://127.0.0.1:{port}"
            finally:
                server.should_exit = True
