"""The hook loop: the channels of hooks.toml, each a `POST /hooks/<name>` on one listener.

The listener is its own TCP socket (`listen` in hooks.toml, loopback by default), apart
from the room's API: what faces a service on the internet serves the hooks and nothing
else, and needs no token, because each delivery is signed. A delivery is checked by its
channel (signature, timestamp, size, form); every message it holds is made a durable turn
request before the hook answers 2xx, so a sender that got 2xx has a request, and one that
did not retries (its retry has the same key: still one turn). An unverified delivery
makes no turn. What a sender did wrong is a 4xx with the reason, a log line and a mark
on the channel's state; a store that cannot take the request is a 503, and the sender
retries.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import AsyncIterator, Mapping

import anyio
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from engine.api.problems import Gate, problem
from engine.channels.base import HookChannel, HookRejected
from engine.loops.inbound import ChannelState, admit
from engine.loops.server import bind_tcp, serve_on, uvicorn_server
from engine.runtime import Runtime

log = logging.getLogger("agentdeck")


def hook_app(rt: Runtime, hooks: Mapping[str, tuple[HookChannel, ChannelState]]) -> Starlette:
    """The ASGI app of the hook listener (without its gate)."""

    async def deliver(request: Request) -> Response:
        name = request.path_params["name"]
        if (found := hooks.get(name)) is None:
            return problem(404, f"no hook {name!r} here")
        channel, state = found
        body = await request.body()
        try:  # the channel checks the signature, the time, the size and the form
            reply, inbound = channel.accept(request.headers, body, time.time())
        except HookRejected as exc:
            state.rejected += 1
            state.last_error = f"refused a delivery: {exc.status} {exc.reason}"
            log.warning("hook %s: refused a delivery: %s %s", name, exc.status, exc.reason)
            return problem(exc.status, exc.reason)
        except Exception as exc:  # a channel's own fault: the sender retries, nothing is lost
            state.fail(f"could not read a delivery: {type(exc).__name__}")
            log.exception("hook %s: could not read a delivery", name)
            return problem(500, "the hook could not read the delivery")
        try:
            for message in inbound:
                await admit(rt, message, state)
        except Exception as exc:  # the store: no 2xx, so the sender delivers it again
            state.fail(f"could not record a message: {exc}")
            log.warning("hook %s: could not record a message: %s", name, exc)
            return problem(503, "the room could not record the message; deliver it again")
        state.ok(rt.clock())
        if isinstance(reply.body, bytes):
            return Response(reply.body, reply.status, media_type=reply.content_type)
        return JSONResponse(reply.body, reply.status)

    async def health(request: Request) -> Response:
        return JSONResponse({"hooks": sorted(hooks)})

    return Starlette(routes=[
        Route("/hooks/{name}", deliver, methods=["POST"]),
        Route("/hooks", health, methods=["GET"]),
    ])  # fmt: skip


@contextlib.asynccontextmanager
async def serve_hooks(
    rt: Runtime,
    hooks: Mapping[str, tuple[HookChannel, ChannelState]],
    listen: str,
    allow_remote: str | None = None,
) -> AsyncIterator[str]:
    """Serve the hooks on `listen` until the block exits; yields the bound address."""
    # the gate refuses what no hook would take before it is read whole
    max_body = max(ch.config.max_body for ch, _ in hooks.values())
    sock = bind_tcp(listen, allow_remote)
    try:
        server = uvicorn_server(Gate(hook_app(rt, hooks), max_body=max_body))
        stopped = anyio.Event()
        async with anyio.create_task_group() as tg:
            tg.start_soon(serve_on, server, sock, stopped)
            host, port = sock.getsockname()[:2]
            try:
                yield f"{host}:{port}"
            finally:
                server.should_exit = True
                with anyio.CancelScope(shield=True), anyio.move_on_after(4):
                    await stopped.wait()
                tg.cancel_scope.cancel()
    finally:
        sock.close()
