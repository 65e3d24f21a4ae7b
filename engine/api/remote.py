"""The client interface over the room owner's API: what every other process uses.

    client = await connect(room)  # None when nobody owns the room
    if client is not None:
        async with client:
            done = await client.outcome((await client.submit(body)).turn_id, wait=30)

Requests go over the room's Unix socket (engine/api/uds_http.py). An error the owner
answers with becomes the matching `ApiError`; an owner that does not answer, or goes away
mid-request, is `OwnerGone`, never a traceback.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import anyio
from anyio.abc import TaskStatus

from engine.api.client import (
    ApiError,
    Conflict,
    Invalid,
    NotFound,
    OwnerGone,
    Receive,
    Refused,
    Resync,
    RoomClient,
)
from engine.api.operations import Operation
from engine.api.sockets import connect_path
from engine.api.uds_http import Broken, Params, Response, TransportError, request, stream
from engine.room import Room, owner_of

if TYPE_CHECKING:
    from pydantic import TypeAdapter

    from engine.api.models import Info
    from engine.api.watch import Watch

STREAM_READ = 45.0  # seconds of silence before an event stream is taken for dead (3 keepalives)
RETRIES = 3  # reconnects of a broken event stream before the owner is taken for gone
EVENTS_LIMIT = 64 * 1024 * 1024  # bytes of one SSE message: the owner batches 2,000 events
_ERRORS: dict[int, type[ApiError]] = {404: NotFound, 409: Conflict, 400: Invalid, 413: Invalid,
                                      422: Invalid, 429: Refused, 503: OwnerGone}  # fmt: skip


class RemoteClient(RoomClient):
    """The room's runtime, in the process that owns the room."""

    hosted = False

    def __init__(self, room: Room) -> None:
        self.room = room
        self.owner: Info | None = None  # as the last `info()` found it
        self._ids = 0

    async def __aenter__(self) -> RemoteClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        pass  # (a connection a request: nothing stays open between them)

    async def _call(self, method: str, path: str, *, body: Any = None,
                    params: Params = (), read_for: float | None = None) -> Any:  # fmt: skip
        try:
            response = await request(connect_path(self.room.socket), method, path,
                                     params=params, body=body, read_for=read_for or 30.0)  # fmt: skip
        except TransportError as exc:
            raise OwnerGone(self._gone(exc)) from None
        if response.status >= 400:
            raise _error(response)
        try:
            return response.json()
        except ValueError:
            raise ApiError(f"the owner answered {path} with something not JSON") from None

    def _gone(self, exc: Exception) -> str:
        who = f"the runtime (pid {self.owner.pid})" if self.owner else "the room's runtime"
        text = str(exc)
        why = ("its socket is gone" if "No such file" in text else
               "nothing listens on its socket" if "refused" in text else
               "it closed the connection" if isinstance(exc, Broken) else
               f"{type(exc).__name__}: {text}" if text else type(exc).__name__)  # fmt: skip
        return f"{who} does not answer on {self.room.socket}: {why}"

    async def carry(self, op: Operation, arguments: dict[str, Any]) -> Any:
        """`op` over the owner's API: the path's parameters in the path, a GET's others in
        its query, another verb's in its JSON body; the answer as `op`'s result type."""
        path = op.path.format(**{n: _seg(str(arguments.pop(n))) for n in op.path_names})
        body: Any = None
        params: Params = ()
        if op.verb == "GET":
            params = [(k, v) for k, v in arguments.items() if v is not None]
        elif (name := op.model_parameter()) is not None:
            body = arguments[name].model_dump(mode="json")
        elif op.body is not None:
            body = op.body(**arguments).model_dump(mode="json")
        read_for = None if op.long_poll is None else float(arguments[op.long_poll]) + 30.0
        data = await self._call(op.verb, path, body=body, params=params, read_for=read_for)
        result = _adapter(op.name, op.result).validate_python(data)
        if op.name == "info":  # who answered, for the errors that name it
            self.owner = result
        return result

    async def follow(
        self, receive: Receive, resync: Resync, *, watch: Watch | None = None,
        task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
    ) -> None:  # fmt: skip
        from engine.api.watch import Watch

        watch = watch or Watch()
        at = _Cursor()
        while True:
            with anyio.CancelScope() as scope:  # a new watch: a new stream, resuming
                stop = watch.listen(scope.cancel)
                try:
                    await self._stream(at, watch.lanes, receive, resync, task_status)
                except (TransportError, ValueError) as exc:
                    at.failures += 1
                    if at.failures > RETRIES or owner_of(self.room) is None:
                        raise OwnerGone(self._gone(exc)) from None
                    await anyio.sleep(0.1 * at.failures)
                finally:
                    stop()

    async def _stream(self, at: _Cursor, lanes: frozenset[str], receive: Receive,
                      resync: Resync, task_status: TaskStatus[None]) -> None:  # fmt: skip
        """One event stream of `lanes`, from `at` (moved as events come), until it ends."""
        from engine.domain.events import parse_events
        from engine.io.sse import parse_sse, sse_lines

        params: list[tuple[str, Any]] = [("watch", name) for name in sorted(lanes)]
        if at.run is not None:
            params += [("run", at.run), ("after", at.seq)]
            params += [("fresh", name) for name in sorted(lanes - at.lanes)]
        async with stream(
            connect_path(self.room.socket), "GET", "/v1/events", params=params,
            headers={"Accept": "text/event-stream"}, connect_for=10.0, read_for=STREAM_READ,
        ) as response:  # fmt: skip
            if response.status >= 400:
                await response.read()
                raise OwnerGone(f"the runtime refused its event stream: {_error(response)}")
            lines = sse_lines(response.chunks(), EVENTS_LIMIT)
            async for sse in parse_sse(lines, EVENTS_LIMIT):
                at.failures = 0
                if sse.event == "events":
                    for event in parse_events(sse.data):
                        receive(event)
                    at.seq = _seq(sse.id, at.seq)
                elif sse.event == "hello":
                    hello = json.loads(sse.data)
                    if hello["resync"] or (at.run is not None and hello["run_id"] != at.run):
                        await resync()  # events were missed: a new owner, a gap
                    at.run, at.seq, at.lanes = hello["run_id"], hello["seq"], lanes
                    if not at.started:  # the stream is on: nothing after this is missed
                        at.started = True
                        task_status.started()
                elif sse.event == "resync":
                    await resync()
                    at.seq = json.loads(sse.data)["seq"]
                elif sse.event == "bye":
                    who = f" (pid {self.owner.pid})" if self.owner else ""
                    raise OwnerGone(f"the runtime{who} stopped")


@dataclass
class _Cursor:
    """Where a follower is: the run and the sequence number it has read to, the lanes of
    its last stream, its failures in a row, and whether it has said it started."""

    run: str | None = None
    seq: int = 0
    lanes: frozenset[str] = frozenset()
    failures: int = 0
    started: bool = False


def _seg(value: str) -> str:
    """One path segment (ids are plain, but nothing a caller passes may add a segment)."""
    return quote(value, safe="")


def _seq(sse_id: str, default: int) -> int:
    tail = sse_id.rpartition(":")[2]
    return int(tail) if tail.isdigit() else default


def _error(response: Response) -> ApiError:
    try:
        detail = response.json().get("detail") or response.reason
    except (ValueError, AttributeError):
        detail = response.text[:200] or response.reason
    cls = _ERRORS.get(response.status, ApiError)
    return cls(str(detail), response.status)


@functools.cache
def _adapter(name: str, result: Any) -> TypeAdapter[Any]:
    """The validator of an operation's answer, made when it is first carried (pydantic's
    schema of it too: a command builds only those of the operations it uses)."""
    from pydantic import TypeAdapter

    return TypeAdapter(result)
