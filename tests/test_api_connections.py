"""Idle connections cannot shut the door (issue 25, item 2): connections that send nothing
(or a byte now and then) do not make real requests 503, on the TCP API (before any token
check) or the hook listener, and agent.sock keeps working; a connection that does not send
a request's headers in time is closed (engine/loops/connections.py)."""

from __future__ import annotations

from pathlib import Path

import anyio
import httpx
import pytest

from engine.config import Config, ServerConfig
from engine.loops import connections
from tests.test_api import raw, served
from tests.wait import PATIENCE, until

pytestmark = pytest.mark.anyio

IDLE = 300  # more than a listener keeps open (connections.MAX_CONNECTIONS)


async def test_idle_connections_leave_room_for_real_requests(tmp_path: Path) -> None:
    room = tmp_path / "room"
    async with served(room, Config(server=ServerConfig(listen="127.0.0.1:0"))) as rt:
        host, port = rt.api["listen"].rsplit(":", 1)
        auth = {"Authorization": f"Bearer {(room / 'server.token').read_text().strip()}"}
        idle = [await anyio.connect_tcp(host, int(port)) for _ in range(IDLE)]
        try:
            async with httpx.AsyncClient(base_url=f"http://{host}:{port}") as http:
                for _ in range(3):
                    r = await http.get("/v1/health", headers=auth)
                    assert r.status_code == 200, r.text
            async with raw(room) as http:
                assert (await http.get("/v1/health")).status_code == 200
            # the listener kept no more than its share open: the oldest idle ones closed
            closed = 0
            for stream in idle:
                with anyio.move_on_after(0.001):  # (reading a closed one ends at once)
                    try:
                        await stream.receive()
                    except (anyio.EndOfStream, anyio.BrokenResourceError):
                        closed += 1
            assert closed >= IDLE - connections.MAX_CONNECTIONS
        finally:
            for stream in idle:
                await stream.aclose()


async def test_a_connection_that_sends_no_headers_in_time_is_closed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(connections, "HEADER_TIMEOUT", 0.5)  # the deadline under test
    room = tmp_path / "room"
    async with served(room, Config(server=ServerConfig(listen="127.0.0.1:0"))) as rt:
        host, port = rt.api["listen"].rsplit(":", 1)
        slow = await anyio.connect_tcp(host, int(port))
        silent = await anyio.connect_tcp(host, int(port))
        ended: set[str] = set()

        async def drip() -> None:  # a byte at a time: still no request
            for byte in b"GET /v1/health HTTP/1.1\r\nHost: x\r\n":
                if "slow" in ended:
                    return
                try:
                    await slow.send(bytes([byte]))
                except (anyio.BrokenResourceError, OSError):
                    return
                await anyio.sleep(0.1)  # the drip's pace, slower than the deadline overall

        async def watch(name: str, stream: anyio.abc.ByteStream) -> None:
            try:
                while await stream.receive():
                    pass
            except (anyio.EndOfStream, anyio.BrokenResourceError, OSError):
                pass
            ended.add(name)

        async with anyio.create_task_group() as tg:
            tg.start_soon(drip)
            tg.start_soon(watch, "slow", slow)
            tg.start_soon(watch, "silent", silent)
            await until(lambda: ended, "the server closes both", ok=lambda e: len(e) == 2,
                        within=PATIENCE)  # fmt: skip
            tg.cancel_scope.cancel()
        await slow.aclose()
        await silent.aclose()
