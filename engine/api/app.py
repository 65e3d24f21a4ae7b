"""The room's HTTP API (the `server` loop's routes), over the in-process client.

Every route calls `LocalClient`, so a remote operator gets exactly what the owner's own
console gets. Bodies are the engine's pydantic models; errors are RFC 9457 problem
documents; `/openapi.json` describes it all. Events stream as Server-Sent Events in
batches: `hello` (the run and where the stream starts), `events` (a JSON array; the SSE
id is `run:seq` of its last event, for `Last-Event-ID`), `resync` (events were missed:
reload state, then go on) and `bye` (the runtime is stopping).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable
from typing import Annotated, TypeVar

import anyio
from fastapi import FastAPI, Header, Path, Query
from fastapi.responses import StreamingResponse

from engine import __version__
from engine.api.client import OwnerGone
from engine.api.hub import EventHub
from engine.api.local import LocalClient
from engine.api.models import (
    CancelBody,
    Cancelled,
    ChannelsView,
    Decided,
    DeliveryRow,
    GroupChange,
    Info,
    NewRule,
    Problem,
    RevokeBody,
    Revoked,
    RoomOverview,
    SubmitBody,
    Submitted,
)
from engine.api.problems import install_problem_handlers
from engine.cluster_view import ClusterView
from engine.decisions import Decision, PendingCall
from engine.outcome import TurnOutcome
from engine.review import Killed, Review
from engine.rules import Rule
from engine.scheduler import GroupConfig, Statistics

KEEPALIVE = 15.0  # seconds between comments on an idle event stream
BATCH = 2_000  # events per SSE message at most
# Streams share a budget of SENDS messages a second: each sends at most one message per
# `streams / SENDS` seconds, with a burst of BURST after a quiet spell (a token bucket).
# A commit publishes a few events, and a message per commit per stream made the runtime's
# loop a socket writer (16 consoles: 34 writes a step, steps 6-13x slower). One console
# gets its events within 2.5 ms; sixteen within 40 ms, under one frame of theirs.
SENDS = 400
BURST = 4
GROUP_NAME = r"^[A-Za-z0-9_.:-]{1,64}$"
DELIVERY_STATE = r"^(pending|retrying|sent|dead|dropped)$"
T = TypeVar("T")


def make_api(client: LocalClient, hub: EventHub, closing: anyio.Event) -> FastAPI:
    """The API of one runtime; `closing` is set when it stops (long polls then end)."""
    problem = {"model": Problem, "content": {"application/problem+json": {}}}
    api = FastAPI(title="agentdeck", version=__version__, docs_url=None, redoc_url=None,
                  description="The API of one agentdeck room's runtime.",
                  responses={status: problem for status in (400, 401, 404, 409, 413, 422, 429, 503)})  # fmt: skip
    install_problem_handlers(api)

    @api.get("/v1/health")
    async def health() -> Info:
        """Who serves the room: pid, run, model, version, uptime (503 while stopping)."""
        if closing.is_set():
            raise OwnerGone("the runtime is stopping")
        info = await client.info()
        return info.model_copy(update={"seq": hub.head, "streams": hub.streams})

    @api.post("/v1/messages", status_code=202)
    async def submit(body: SubmitBody) -> Submitted:
        """Offer a message for a turn; answered once the request is durable."""
        return await client.submit(body)

    @api.get("/v1/turns/{turn_id}")
    async def outcome(turn_id: str, wait: Annotated[float, Query(ge=0, le=60)] = 0) -> TurnOutcome:
        """Where a turn stands; `wait` seconds at most for it to stop running first."""
        if wait > 0 and (done := await _until(closing, client.outcome(turn_id, wait))):
            return done
        return await client.outcome(turn_id)

    @api.post("/v1/turns/{turn_id}/cancel")
    async def cancel(turn_id: str, body: CancelBody | None = None) -> Cancelled:
        """Cancel a running or waiting turn: it ends done/cancelled."""
        return await client.cancel(turn_id, (body or CancelBody()).reason)

    @api.get("/v1/pending")
    async def pending() -> list[PendingCall]:
        """Every call waiting for a decision, oldest first."""
        return await client.pending()

    @api.post("/v1/decisions")
    async def decide(decision: Decision) -> Decided:
        """Approve (maybe with edited arguments, or a result to use), or cancel, a call."""
        return await client.decide(decision)

    @api.get("/v1/reviews")
    async def reviews() -> list[Review]:
        """Every call waiting for a review after a crash, with what is known of it now."""
        return await client.reviews()

    @api.post("/v1/reviews/{call_id}/kill")
    async def kill_orphan(call_id: str) -> Killed:
        """End the process group a crash left of a call (SIGTERM, then SIGKILL): only one
        this room recorded, in an earlier run; 409 otherwise."""
        return await client.kill_orphan(call_id)

    @api.get("/v1/rules")
    async def rules() -> list[Rule]:
        """Every rule applied: agentdeck.toml's, then execution.db's, with uses and last use."""
        return await client.rules()

    @api.post("/v1/rules", status_code=201)
    async def add_rule(rule: NewRule) -> Rule:
        """Store and apply a new rule (422 for a pattern, tool or scope that cannot be used)."""
        return await client.add_rule(rule)

    @api.post("/v1/rules/{rule_id}/revoke")
    async def revoke_rule(rule_id: str, body: RevokeBody | None = None) -> Revoked:
        """Revoke a rule of execution.db (404 no such rule; 409 agentdeck.toml's, which is
        changed in the file, or one revoked already)."""
        return await client.revoke_rule(rule_id, (body or RevokeBody()).by)

    @api.get("/v1/channels")
    async def channels() -> ChannelsView:
        """Every loop (server, pulse, hook listener) and channel with its state (starting,
        up, failing, stopped), and the outbound deliveries by state."""
        return await client.channels()

    @api.get("/v1/deliveries")
    async def deliveries(
        state: Annotated[str | None, Query(pattern=DELIVERY_STATE)] = None,
        limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    ) -> list[DeliveryRow]:
        """The answers owed to channels, newest first; only those in `state` when given."""
        return await client.deliveries(state, limit)

    @api.post("/v1/deliveries/{outbox_id}/retry")
    async def retry_delivery(outbox_id: int) -> DeliveryRow:
        """Send a dead answer again (404 no such delivery; 409 not dead, or the delivery
        worker is not running)."""
        return await client.retry_delivery(outbox_id)

    @api.post("/v1/deliveries/{outbox_id}/drop")
    async def drop_delivery(outbox_id: int) -> DeliveryRow:
        """Give up on a dead or retrying answer (404 no such delivery; 409 neither, or the
        delivery worker is not running)."""
        return await client.drop_delivery(outbox_id)

    @api.get("/v1/rooms")
    async def rooms() -> list[RoomOverview]:
        """Every room on the machine's bus, with its running and waiting turns and whether
        its owner is alive."""
        return await client.rooms()

    @api.get("/v1/scheduler")
    async def scheduler() -> Statistics:
        """Groups, busy threads, queued requests and why each waits."""
        return await client.statistics()

    @api.get("/v1/cluster")
    async def cluster() -> ClusterView | None:
        """The cluster's workers (heartbeat, state, leases, the first threads each leases)
        and every thread with the worker leasing it; null when the runtime is not a
        cluster's worker."""
        return await client.cluster()

    @api.patch("/v1/groups/{name}")
    async def configure_group(
        name: Annotated[str, Path(pattern=GROUP_NAME)], change: GroupChange
    ) -> GroupConfig:
        """Pause, resume or re-budget a thread group; it persists."""
        return await client.configure_group(name, change)

    @api.get("/v1/events", response_class=StreamingResponse,
             responses={200: {"content": {"text/event-stream": {}}}})  # fmt: skip
    async def events(
        run: str | None = None,
        after: Annotated[int, Query(ge=0)] = 0,
        last_event_id: Annotated[str | None, Header()] = None,
    ) -> StreamingResponse:
        """The runtime's events as Server-Sent Events, from `after` of `run` (or from now)."""
        if last_event_id and ":" in last_event_id:
            run, _, seq = last_event_id.rpartition(":")
            # ASCII digits a sequence can hold (`isdigit` takes '²', and int() refuses 5,000
            # digits): anything else resumes from the start of the buffer
            after = int(seq) if seq.isascii() and seq.isdigit() and len(seq) <= 18 else 0
        if hub.closed:
            raise OwnerGone("the runtime is stopping")
        return StreamingResponse(
            _stream(hub, run, after), media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )  # fmt: skip

    return api


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


async def _stream(hub: EventHub, run: str | None, after: int) -> AsyncIterator[bytes]:
    hub.streams += 1
    try:
        resume = run == hub.run_id and after >= hub.oldest - 1 and after <= hub.head
        cursor = after if resume else hub.head
        hello = {"run_id": hub.run_id, "seq": cursor, "resync": run is not None and not resume}
        yield _sse("hello", json.dumps(hello), f"{hub.run_id}:{cursor}")
        tokens, last = float(BURST), anyio.current_time()
        while True:
            with anyio.move_on_after(KEEPALIVE):
                await hub.wait_beyond(cursor)
            if hub.head <= cursor:
                if hub.closed:
                    yield _sse("bye", json.dumps({"run_id": hub.run_id, "seq": cursor}))
                    return
                yield b": keepalive\n\n"
                continue
            now, every = anyio.current_time(), hub.streams / SENDS
            tokens, last = min(BURST, tokens + (now - last) / every), now
            if tokens < 1 and not hub.closed:  # let events gather until a token is due
                await anyio.sleep((1 - tokens) * every)
                tokens, last = 1.0, anyio.current_time()
            tokens -= 1
            items = hub.since(cursor, BATCH)
            if items is None:  # this reader fell behind the ring: it must reload
                cursor = hub.head
                yield _sse("resync", json.dumps({"run_id": hub.run_id, "seq": cursor}),
                           f"{hub.run_id}:{cursor}")  # fmt: skip
                continue
            cursor += len(items)
            yield _sse("events", f"[{','.join(items)}]", f"{hub.run_id}:{cursor}")
    finally:
        hub.streams -= 1
