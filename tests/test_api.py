"""The server loop: the room's API over its real Unix socket (and loopback TCP), driven by
the real remote client and by raw HTTP, against a real runtime and execution.db."""

from __future__ import annotations

import json
import os
import socket
import stat
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from engine.api.client import Conflict, Invalid, NotFound, OwnerGone, Refused, ServerError
from engine.api.connect import connect
from engine.api.models import GroupChange, SubmitBody
from engine.api.remote import RemoteClient
from engine.api.sockets import connect_path
from engine.config import Config, ServerConfig
from engine.domain.decisions import Decision
from engine.domain.events import Event, TurnChanged
from engine.io.sse import parse_sse
from engine.loops.server import serve_api
from engine.providers.offline import OfflineModel
from engine.room import Room
from engine.runtime import Runtime
from tests.helpers import room_rows
from tests.wait import PATIENCE, until

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("store_backend")]


@asynccontextmanager
async def served(room: Path, config: Config | None = None) -> AsyncIterator[Runtime]:
    async with Runtime.open(room, kind="run", provider=OfflineModel(delay=0),
                            config=config) as rt, serve_api(rt):  # fmt: skip
        yield rt


def raw(room: Path) -> httpx.AsyncClient:
    transport = httpx.AsyncHTTPTransport(uds=connect_path(room / "agent.sock"))
    return httpx.AsyncClient(transport=transport, base_url="http://agentdeck")


def body(text: str, thread: str = "api:1", **kw: Any) -> SubmitBody:
    return SubmitBody(origin="invoke", sender="test", thread_id=thread, text=text, **kw)


async def settled(client: RemoteClient, turn_id: str) -> Any:
    """The turn's outcome once its loop has stopped (done, or waiting on a decision); each
    look is a long poll."""
    return await until(
        lambda: client.outcome(turn_id, wait=5),
        f"turn {turn_id} settled",
        ok=lambda outcome: outcome.status not in ("running", "queued"),
    )


async def test_the_socket_is_private_answers_health_and_is_removed_on_exit(tmp_path: Path):
    room = tmp_path / "room"
    async with served(room) as rt:
        sock = room / "agent.sock"
        assert stat.S_ISSOCK(sock.stat().st_mode)
        assert stat.S_IMODE(sock.stat().st_mode) == 0o600
        async with RemoteClient(Room.at(room)) as client:
            info = await client.info()
        assert (info.pid, info.run_id, info.kind) == (os.getpid(), rt.run_id, "run")
        assert info.model == "offline:offline-rules-1" and info.version
        assert json.loads((room / "agent.run").read_text())["socket"] == str(sock)
    assert not sock.exists()


async def test_a_stale_socket_is_replaced_and_a_live_one_is_left_alone(tmp_path: Path):
    room = tmp_path / "room"
    room.mkdir()
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(str(room / "agent.sock"))
    stale.close()  # what a SIGKILLed owner leaves: the file, nobody listening
    async with served(room):
        async with RemoteClient(Room.at(room)) as client:
            assert (await client.info()).kind == "run"
    live = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        live.bind(str(room / "agent.sock"))
        live.listen(1)
        with pytest.raises(ServerError, match="a live server answers"):
            async with served(room):
                pass
        assert (room / "agent.sock").exists()
    finally:
        live.close()


async def test_a_room_deep_in_the_file_system_still_serves(tmp_path: Path):
    room = tmp_path / ("d" * 60) / ("e" * 60) / "room"  # past sun_path's 108 bytes
    async with served(room):
        async with RemoteClient(Room.at(room)) as client:
            assert (await client.info()).kind == "run"


async def test_openapi_describes_the_routes_with_the_engines_models(tmp_path: Path):
    room = tmp_path / "room"
    async with served(room), raw(room) as http:
        doc = (await http.get("/openapi.json")).json()
    paths = doc["paths"]
    for path in ("/v1/health", "/v1/messages", "/v1/turns/{turn_id}", "/v1/pending",
                 "/v1/decisions", "/v1/turns/{turn_id}/cancel", "/v1/scheduler",
                 "/v1/groups/{name}", "/v1/events"):  # fmt: skip
        assert path in paths, path
    assert {"Decision", "SubmitBody", "PendingCall", "TurnOutcome"} <= set(
        doc["components"]["schemas"]
    )


async def test_submit_wait_pending_decide_and_a_duplicate(tmp_path: Path):
    room = tmp_path / "room"
    async with served(room), RemoteClient(Room.at(room)) as client:
        submitted = await client.submit(body("run `echo hi`"))
        assert submitted.status in ("admitted", "queued")
        # acknowledged only once durable: the request is in execution.db already
        assert room_rows(room, "SELECT id FROM turn_requests WHERE id=?", submitted.request_id)
        outcome = await settled(client, submitted.turn_id)
        assert (outcome.status, outcome.reason) == ("waiting", "suspended")
        (call,) = await client.pending()
        assert (call.tool, call.args, call.turn_id) == ("shell", {"command": "echo hi"},
                                                        submitted.turn_id)  # fmt: skip
        first = await client.decide(Decision.approve(call.call_id, seen=call.args, id="d_first"))
        assert (first.status, first.turn_id) == ("queued", submitted.turn_id)
        outcome = await settled(client, submitted.turn_id)
        assert (outcome.status, outcome.reason) == ("done", "natural") and "hi" in outcome.text
        late = await client.decide(Decision.cancel(call.call_id, "too late", id="d_late"))
        assert (late.status, late.winner, late.call_status) == ("duplicate", "d_first",
                                                                "succeeded")  # fmt: skip
        again = await client.decide(Decision.approve(call.call_id, id="d_first"))
        assert again.status == "duplicate"  # the same decision twice changes nothing
        assert await client.pending() == []


async def test_cancel_a_waiting_turn_and_group_changes(tmp_path: Path):
    room = tmp_path / "room"
    async with served(room), RemoteClient(Room.at(room)) as client:
        sub = await client.submit(body("run `sleep 1`"))
        assert (await settled(client, sub.turn_id)).status == "waiting"
        cancelled = await client.cancel(sub.turn_id, "not today")
        assert cancelled.cancelled
        outcome = await settled(client, sub.turn_id)
        assert (outcome.status, outcome.reason) == ("done", "cancelled")
        assert not (await client.cancel(sub.turn_id)).cancelled
        group = await client.configure_group("chat", GroupChange(paused=True))
        assert group.paused
        stats = await client.statistics()
        assert next(g for g in stats.groups if g.name == "chat").paused
        chat = await client.submit(SubmitBody(origin="chat", channel="api", sender="me",
                                              thread_id="chat:x", text="calc 1+1"))  # fmt: skip
        assert chat.status == "queued" and chat.why_queued == "group chat paused"
        queued = await client.outcome(chat.turn_id)
        assert (queued.status, queued.reason) == ("queued", "group chat paused")
        await client.configure_group("chat", GroupChange(paused=False))
        assert (await settled(client, chat.turn_id)).text == "`calc` returned: 2"


async def test_a_waiting_thread_is_refused_when_asked(tmp_path: Path):
    room = tmp_path / "room"
    async with served(room), RemoteClient(Room.at(room)) as client:
        sub = await client.submit(body("run `ls`", thread="api:w"))
        await settled(client, sub.turn_id)
        with pytest.raises(Conflict, match="waiting for a decision"):
            await client.submit(body("calc 1+1", thread="api:w", refuse_if_waiting=True))


async def test_bad_requests_are_problems_and_change_nothing(tmp_path: Path):
    room = tmp_path / "room"
    async with served(room), raw(room) as http:
        before = room_rows(room, "SELECT count(*) FROM turn_requests")
        cases = [
            ("POST", "/v1/messages", b"{not json", 422),
            ("POST", "/v1/messages", json.dumps({"thread_id": 5, "text": []}).encode(), 422),
            ("POST", "/v1/messages", json.dumps({"thread_id": "t", "text": "x", "origin": "task"}).encode(), 422),
            ("POST", "/v1/messages", json.dumps({"thread_id": "t", "text": "x", "origin": "chat"}).encode(), 422),
            ("POST", "/v1/messages", json.dumps({"thread_id": "t", "text": "x", "extra": 1}).encode(), 422),
            ("POST", "/v1/messages", json.dumps({"thread_id": "t", "text": "x", "strategy": "nope"}).encode(), 422),
            ("POST", "/v1/decisions", json.dumps({"call_id": "c_nope", "action": "resume"}).encode(), 404),
            ("POST", "/v1/decisions", json.dumps({"call_id": "c", "action": "explode"}).encode(), 422),
            ("POST", "/v1/decisions", json.dumps({"call_id": "c", "action": "cancel", "args": {}}).encode(), 422),
            ("GET", "/v1/turns/t_nope", b"", 404),
            ("GET", "/v1/turns/t_nope?wait=1", b"", 404),  # was a 500 (found by schemathesis)
            ("GET", "/v1/turns/%15%F3%86%81?wait=0.5", b"", 404),
            ("PATCH", "/v1/groups/chta", json.dumps({"paused": True}).encode(), 404),  # a typo
            ("PATCH", "/v1/groups/chat", json.dumps({"paused": 0}).encode(), 422),
            ("POST", "/v1/turns/t_nope/cancel", b"z\xff\xfe", 400),
            ("POST", "/v1/turns/t_nope/cancel", b"", 404),
            ("GET", "/v1/nowhere", b"", 404),
            ("DELETE", "/v1/pending", b"", 405),
            ("PATCH", "/v1/groups/chat", json.dumps({"max_running_turns": -1}).encode(), 422),
            ("PATCH", "/v1/groups/bad%20name", json.dumps({"paused": True}).encode(), 422),
            ("GET", "/v1/turns/t?wait=1e9", b"", 422),
            # lone surrogates (tests/fuzz: stored, they ended a turn or broke the request)
            ("POST", "/v1/messages", b'{"thread_id": "t", "text": "x\\udcff"}', 422),
            ("POST", "/v1/messages", b'{"thread_id": "t", "text": "x", "meta": {"\\ud800": 1}}', 422),
            ("POST", "/v1/decisions", b'{"call_id": "c", "action": "cancel", "reason": "\\udc00"}', 422),
            ("POST", "/v1/decisions", b'{"call_id": "c", "action": "resume", "args": {"a": "\\ud800"}}', 422),
        ]  # fmt: skip
        for method, path, content, status in cases:
            headers = {"content-type": "application/json"} if content else {}
            r = await http.request(method, path, content=content, headers=headers)
            assert r.status_code == status, (method, path, r.text)
            assert r.headers["content-type"] == "application/problem+json", path
            problem = r.json()
            assert problem["status"] == status and problem["title"] and problem["detail"], path
        # still serving, nothing recorded
        assert (await http.get("/v1/health")).status_code == 200
        assert room_rows(room, "SELECT count(*) FROM turn_requests") == before


async def test_an_oversized_body_is_refused_before_it_is_read_whole(tmp_path: Path):
    room = tmp_path / "room"
    config = Config(server=ServerConfig(max_body=4096))
    async with served(room, config), raw(room) as http:
        big = json.dumps({"thread_id": "t", "text": "x" * 10_000}).encode()
        r = await http.post(
            "/v1/messages", content=big, headers={"content-type": "application/json"}
        )
        assert r.status_code == 413 and r.headers["content-type"] == "application/problem+json"

        async def chunks() -> AsyncIterator[bytes]:  # no Content-Length: chunked
            for _ in range(10):
                yield b" " * 1000

        r = await http.post("/v1/messages", content=chunks(),
                            headers={"content-type": "application/json"})  # fmt: skip
        assert r.status_code == 413
        assert (await http.get("/v1/health")).status_code == 200


async def test_tcp_needs_the_token_and_the_token_file_is_private(tmp_path: Path):
    room = tmp_path / "room"
    config = Config(server=ServerConfig(listen="127.0.0.1:0"))
    async with served(room, config) as rt:
        listen = rt.api["listen"]
        token_file = room / "server.token"
        assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
        token = token_file.read_text().strip()
        assert len(token) >= 32
        async with httpx.AsyncClient(base_url=f"http://{listen}") as http:
            body_ = {"thread_id": "tcp:1", "text": "calc 1+1"}
            for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": token},
                            {"Authorization": f"Basic {token}"}):  # fmt: skip
                for method, path in (("GET", "/v1/health"), ("GET", "/openapi.json"),
                                     ("GET", "/v1/pending"), ("POST", "/v1/messages")):  # fmt: skip
                    r = await http.request(method, path, headers=headers,
                                           json=body_ if method == "POST" else None)  # fmt: skip
                    assert r.status_code == 401, (headers, path)
                    assert r.headers["www-authenticate"] == "Bearer"
            assert room_rows(room, "SELECT count(*) FROM turn_requests") == [(0,)]
            ok = await http.get("/v1/health", headers={"Authorization": f"Bearer {token}"})
            assert ok.status_code == 200 and ok.json()["run_id"] == rt.run_id
        # the socket needs no token: its file mode is the permission
        async with RemoteClient(Room.at(room)) as client:
            assert (await client.info()).run_id == rt.run_id


async def test_non_loopback_is_refused_unless_named(tmp_path: Path):
    room = tmp_path / "room"
    with pytest.raises(ServerError, match='allow_remote = "0.0.0.0"'):
        async with served(room, Config(server=ServerConfig(listen="0.0.0.0:0"))):
            pass
    assert not (room / "agent.sock").exists()
    config = Config(server=ServerConfig(listen="0.0.0.0:0", allow_remote="0.0.0.0"))
    async with served(room, config) as rt:
        assert rt.api["listen"].startswith("0.0.0.0:")


async def test_keys_never_cross_the_api(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    secret = "sk-test-do-not-leak-0123456789"
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    room = tmp_path / "room"
    async with Runtime.open(room, kind="run") as rt, serve_api(rt), raw(room) as http:
        assert rt.provider.name == "openai"
        for path in ("/v1/health", "/openapi.json", "/v1/scheduler", "/v1/pending"):
            assert secret not in (await http.get(path)).text


async def collect(client: RemoteClient, during: Any, events: list[Event], resyncs: list[int]):
    async def resync() -> None:
        resyncs.append(len(events))

    with anyio.fail_after(PATIENCE):
        async with anyio.create_task_group() as tg:
            await tg.start(client.follow, events.append, resync)
            await during()
            tg.cancel_scope.cancel()


async def test_events_stream_in_order_and_a_reconnect_gets_what_it_missed(tmp_path: Path):
    room = tmp_path / "room"
    async with served(room) as rt, raw(room) as http:
        async with RemoteClient(Room.at(room)) as client:
            events: list[Event] = []

            async def one_turn() -> None:
                sub = await client.submit(body("calc 2+2"))
                await settled(client, sub.turn_id)
                await until(lambda: events[-1] if events else None,
                            "the follower got the turn's end",
                            ok=lambda e: isinstance(e, TurnChanged) and e.status == "done")  # fmt: skip

            await collect(client, one_turn, events, [])
        kinds = [e.kind for e in events]
        assert kinds[0] == "turn_started" and isinstance(events[-1], TurnChanged)
        assert events[-1].status == "done"
        # a reader that saw up to seq 2 of this run gets 3.. again, in order
        replayed: list[dict[str, Any]] = []
        with anyio.fail_after(PATIENCE):
            async with http.stream("GET", "/v1/events", params={"run": rt.run_id, "after": 2},
                                   headers={"accept": "text/event-stream"}) as r:  # fmt: skip
                async for sse in parse_sse(r.aiter_lines()):
                    if sse.event == "hello":
                        assert json.loads(sse.data) == {"run_id": rt.run_id, "seq": 2,
                                                        "resync": False}  # fmt: skip
                    elif sse.event == "events":
                        replayed += json.loads(sse.data)
                        assert sse.id == f"{rt.run_id}:{2 + len(replayed)}"
                        if len(replayed) >= len(kinds) - 2:
                            break
    assert [e["kind"] for e in replayed] == kinds[2:]


async def test_a_reader_too_far_behind_is_told_to_resync(tmp_path: Path):
    room = tmp_path / "room"
    config = Config(server=ServerConfig(event_buffer=100))
    async with served(room, config) as rt, RemoteClient(Room.at(room)) as client:
        while (await client.info()).seq < 150:  # more events than the ring holds
            sub = await client.submit(body("calc 1+1 and calc 2+2 and calc 3+3"))
            await settled(client, sub.turn_id)
        async with raw(room) as http:
            async with http.stream("GET", "/v1/events", params={"run": rt.run_id, "after": 1},
                                   headers={"accept": "text/event-stream"}) as r:  # fmt: skip
                lines = r.aiter_lines()
                hello = [await anext(lines) for _ in range(3)]
        assert hello[1] == "event: hello" and '"resync": true' in hello[2]
        assert rt.scheduler is not None  # the runtime went on regardless


async def test_an_owner_that_dies_mid_request_is_owner_gone(tmp_path: Path):
    import signal
    import subprocess
    import sys
    import threading

    room = tmp_path / "room"
    code = "import sys; from engine.cli import main; sys.exit(main(sys.argv[1:]))"
    proc = subprocess.Popen([sys.executable, "-c", code, "--room", str(room), "run"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=Path(__file__).resolve().parents[1])  # fmt: skip
    try:
        assert proc.stdout is not None and proc.stdout.readline().startswith("agentdeck run ")
        client = await connect(Room.at(room))
        assert client is not None
        async with client:
            sub = await client.submit(body("run `sleep 5`"))
            await settled(client, sub.turn_id)
            (call,) = await client.pending()
            await client.decide(Decision.approve(call.call_id, seen=call.args))  # runs `sleep 5`
            killer = threading.Timer(0.3, proc.send_signal, (signal.SIGKILL,))
            killer.start()
            with pytest.raises(OwnerGone, match="does not answer"):
                await client.outcome(sub.turn_id, wait=30)  # a long poll, cut short
            killer.join()
    finally:
        proc.kill()
        proc.wait()
        proc.stdout.close() if proc.stdout else None
        proc.stderr.close() if proc.stderr else None
    # the room is free again and nothing answers on the stale socket
    assert await connect(Room.at(room)) is None


async def test_invalid_and_not_found_errors_are_typed(tmp_path: Path):
    room = tmp_path / "room"
    async with served(room), RemoteClient(Room.at(room)) as client:
        with pytest.raises(NotFound):
            await client.decide(Decision.approve("c_nope"))
        with pytest.raises(NotFound):
            await client.outcome("t_nope")
        with pytest.raises(Invalid):
            await client.submit(SubmitBody(thread_id="t", text="x", origin="chat"))


async def test_a_full_queue_is_refused_with_its_reason(tmp_path: Path):
    room = tmp_path / "room"
    async with served(room), RemoteClient(Room.at(room)) as client:
        await client.configure_group("chat", GroupChange(paused=True, max_queued_turns=1))
        await client.submit(body("calc 1+1", thread="q:1"))
        with pytest.raises(Refused, match="group chat queue is full"):
            await client.submit(body("calc 1+1", thread="q:2"))


def test_a_batch_of_events_is_bounded_in_bytes():
    """A batch held up to 2,000 events whatever their size: a client's line limit could be
    passed by a batch of big ones (found by the providers' review)."""
    from engine.api.hub import EventHub
    from engine.domain.events import TextDelta

    hub = EventHub("r_1", size=100)
    first, _ = hub.open(["all"], "r_1", 0)
    second, _ = hub.open(["all"], "r_1", 0)
    for _ in range(50):
        hub.publish(TextDelta(at=0.0, text="x" * 1000))
    batch = hub.read(first, 2_000, max_bytes=10_000)
    assert batch is not None and 5 <= len(batch) <= 10
    assert sum(map(len, batch)) <= 10_000
    assert len(hub.read(second, 2_000, max_bytes=10) or []) == 1  # one at least: progress


def test_tcp_connections_are_served_without_nagles_delay() -> None:
    """A TCP listener's connections have TCP_NODELAY: asyncio sets it only on sockets
    that say IPPROTO_TCP, and without it each answer (headers, then body) waited for the
    client's delayed ACK, ~40 ms (the hook listener served 197 deliveries/s)."""
    import socket

    from engine.loops.server import bind_tcp

    listener = bind_tcp("127.0.0.1:0", None)
    try:
        assert listener.proto == socket.IPPROTO_TCP
        listener.setblocking(True)
        client = socket.create_connection(listener.getsockname()[:2])
        conn, _ = listener.accept()
        with client, conn:
            assert conn.proto == socket.IPPROTO_TCP
            assert conn.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
    finally:
        listener.close()
