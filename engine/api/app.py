"""The room's HTTP API (the `server` loop's routes), over the in-process client.

Every route is an operation of the table (engine/api/operations.py) answered by
`LocalClient`, so a remote operator gets exactly what the owner's own console gets.
Bodies are the engine's pydantic models; errors are RFC 9457 problem documents;
`/openapi.json` describes it all. Events stream as Server-Sent Events in
batches: `hello` (the run and where the stream starts), `events` (a JSON array; the SSE
id is `run:seq` of its last event, for `Last-Event-ID`), `resync` (events were missed:
reload state, then go on) and `bye` (the runtime is stopping).
"""

from __future__ import annotations

import inspect
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Annotated, Any, TypeVar

import anyio
from fastapi import FastAPI, Header, Path, Query
from fastapi.responses import StreamingResponse

from engine import __version__
from engine.api.client import Invalid, OwnerGone
from engine.api.hub import EventHub
from engine.api.local import LocalClient
from engine.api.models import Info, Problem
from engine.api.operations import OPERATIONS, Operation
from engine.api.problems import install_problem_handlers
from engine.api.watch import ALL, MAX_ID, MAX_LANES, lane_problem
from engine.domain.outcome import TurnOutcome

KEEPALIVE = 15.0  # seconds between comments on an idle event stream
BATCH = 2_000  # events per SSE message at most
# Streams share a budget of SENDS messages a second: each sends at most one message per
# `streams / SENDS` seconds, with a burst of BURST after a quiet spell (a token bucket).
# A commit publishes a few events, and a message per commit per stream made the runtime's
# loop a socket writer (16 consoles: 34 writes a step, steps 6-13x slower). One console
# gets its events within 2.5 ms; sixteen within 40 ms, under one frame of theirs.
SENDS = 400
BURST = 4
SLOW_EVERY = 0.2  # seconds between messages of a stream that has only slow lanes' events
PROBLEM: dict[str, Any] = {"model": Problem, "content": {"application/problem+json": {}}}
T = TypeVar("T")


def make_api(client: LocalClient, hub: EventHub, closing: anyio.Event) -> FastAPI:
    """The API of one runtime; `closing` is set when it stops (long polls then end)."""
    api = FastAPI(title="agentdeck", version=__version__, docs_url=None, redoc_url=None,
                  description="The API of one agentdeck room's runtime.",
                  responses={status: PROBLEM for status in (400, 401, 413, 422, 503)})  # fmt: skip
    install_problem_handlers(api)

    async def health() -> Info:
        if closing.is_set():
            raise OwnerGone("the runtime is stopping")
        info = await client.info()
        return info.model_copy(update={"seq": hub.head, "streams": hub.streams})

    async def outcome(turn_id: str, wait: float = 0) -> TurnOutcome:
        if wait > 0 and (done := await _until(closing, client.outcome(turn_id, wait))):
            return done
        return await client.outcome(turn_id)

    special: dict[str, Callable[..., Awaitable[Any]]] = {"info": health, "outcome": outcome}
    for op in OPERATIONS.values():  # the routes: one per operation of the table
        _route(api, op, special.get(op.name) or getattr(client, op.name))

    @api.get("/v1/events", response_class=StreamingResponse,
             responses={200: {"content": {"text/event-stream": {}}}})  # fmt: skip
    async def events(
        run: str | None = None,
        after: Annotated[int, Query(ge=0)] = 0,
        watch: Annotated[list[str] | None, Query(max_length=MAX_ID + 16)] = None,
        fresh: Annotated[list[str] | None, Query(max_length=MAX_ID + 16)] = None,
        last_event_id: Annotated[str | None, Header()] = None,
    ) -> StreamingResponse:
        """The runtime's events as Server-Sent Events, from `after` of `run` (or from now),
        of the lanes in `watch` (engine/api/watch.py; repeat it: `watch=queue&watch=counts`;
        default `all`). `fresh` names lanes added to a resumed watch: their events are
        those from now."""
        lanes = watch or [ALL]
        if len(lanes) > MAX_LANES:
            raise Invalid(f"a stream watches at most {MAX_LANES} lanes")
        for name in (*lanes, *(fresh or ())):
            if (why := lane_problem(name)) is not None:
                raise Invalid(why)
        if last_event_id and ":" in last_event_id:
            run, _, seq = last_event_id.rpartition(":")
            # ASCII digits a sequence can hold (`isdigit` takes '²', and int() refuses 5,000
            # digits): anything else resumes from the start of the buffer
            after = int(seq) if seq.isascii() and seq.isdigit() and len(seq) <= 18 else 0
        if hub.closed:
            raise OwnerGone("the runtime is stopping")
        return StreamingResponse(
            _stream(hub, lanes, run, after, fresh or []), media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )  # fmt: skip

    return api


def _route(api: FastAPI, op: Operation, handler: Callable[..., Awaitable[Any]]) -> None:
    """The route of `op`: its parameters where the table puts them (path, query, body),
    validated as declared, answered by `handler(**parameters)`."""
    params: list[inspect.Parameter] = []
    body_fields: tuple[str, ...] = ()
    for p in op.signature.parameters.values():
        limits = op.constraints.get(p.name, {})
        if p.name in op.path_names:
            params.append(p.replace(annotation=Annotated[p.annotation, Path(**limits)]))
        elif op.verb == "GET":
            query = Query(**limits)
            params.append(p.replace(annotation=Annotated[p.annotation, query]))
        elif op.body is None:  # the one model that is the body
            params.append(p)
    if op.body is not None:  # the other parameters are the fields of `op.body`
        body_fields = tuple(n for n in op.signature.parameters if n not in op.path_names)
        params.append(inspect.Parameter("body", inspect.Parameter.KEYWORD_ONLY,
                                        annotation=op.body | None, default=None))  # fmt: skip

    async def endpoint(**kw: Any) -> Any:
        if body_fields:
            body = kw.pop("body") or op.body()
            kw.update({n: getattr(body, n) for n in body_fields})
        return await handler(**kw)

    endpoint.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in params],
        return_annotation=op.result,
    )  # fmt: skip
    api.add_api_route(op.path, endpoint, methods=[op.verb], status_code=op.status,
                      response_model=op.result, name=op.name, summary=op.summary,
                      description=inspect.cleandoc(op.stub.__doc__ or ""),
                      responses={s: PROBLEM for s in (*op.errors, *((507,) if op.mutates else ()))})  # fmt: skip


async def _until(closing: anyio.Event, work: Awaitable[T]) -> T | None:
    """Await `work`, or stop waiting (None) when the runtime starts closing."""
    result: T | None = None
    try:
        async with anyio.create_task_group() as tg:

            async def stop_on_close() -> None:
                await closing.wait()
                tg.cancel_scope.cancel()

            tg.start_soon(stop_on_close)
            result = await work
            tg.cancel_scope.cancel()
    except BaseExceptionGroup as group:  # the work's own error, as itself (a 404, say)
        if len(group.exceptions) == 1:
            raise group.exceptions[0] from None
        raise
    return result


def _sse(event: str, data: str, id: str | None = None) -> bytes:
    head = f"id: {id}\n" if id else ""
    return f"{head}event: {event}\ndata: {data}\n\n".encode()


async def _stream(hub: EventHub, watch: list[str], run: str | None, after: int,
                  fresh: list[str]) -> AsyncIterator[bytes]:  # fmt: skip
    stream, resync = hub.open(watch, run, after, fresh)
    try:
        cursor = stream.cursor
        hello = {"run_id": hub.run_id, "seq": cursor, "resync": resync}
        yield _sse("hello", json.dumps(hello), f"{hub.run_id}:{cursor}")
        tokens, last = float(BURST), anyio.current_time()
        sent = float("-inf")  # when this stream last sent events
        while True:
            with anyio.move_on_after(KEEPALIVE):
                await hub.wait(stream)
            if not stream.ready.is_set():
                if hub.closed:
                    yield _sse("bye", json.dumps({"run_id": hub.run_id, "seq": stream.cursor}))
                    return
                yield b": keepalive\n\n"
                continue
            if not stream.hurry.is_set():  # only slow lanes' events: a few times a second
                with anyio.move_on_after(sent + SLOW_EVERY - anyio.current_time()):
                    await stream.hurry.wait()
            now, every = anyio.current_time(), hub.streams / SENDS
            tokens, last = min(BURST, tokens + (now - last) / every), now
            if tokens < 1 and not hub.closed:  # let events gather until a token is due
                await anyio.sleep((1 - tokens) * every)
                tokens, last = 1.0, anyio.current_time()
            tokens -= 1
            items = hub.read(stream, BATCH)
            if items is None:  # a lane it watches dropped events it had not read: reload
                yield _sse("resync", json.dumps({"run_id": hub.run_id, "seq": stream.cursor}),
                           f"{hub.run_id}:{stream.cursor}")  # fmt: skip
                continue
            if items:
                sent = anyio.current_time()
                yield _sse("events", f"[{','.join(items)}]", f"{hub.run_id}:{stream.cursor}")
    finally:
        hub.release(stream)
