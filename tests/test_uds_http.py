"""The room API's HTTP client (engine/api/uds_http.py) against a peer that answers what a
test tells it to: every framing uvicorn uses, and what a broken or silent peer does."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest
from anyio.abc import SocketStream

from engine.api.uds_http import HEAD_LIMIT, Broken, TransportError, request, request_now, stream

pytestmark = pytest.mark.anyio


@asynccontextmanager
async def peer(tmp_path: Path, answer: bytes, *, close: bool = True) -> AsyncIterator[list[bytes]]:
    """A Unix socket server that reads a request, answers `answer` and (unless `close` is
    False: silence) closes; yields the requests it read."""
    seen: list[bytes] = []
    listener = await anyio.create_unix_listener(tmp_path / "s.sock")

    async def serve(conn: SocketStream) -> None:
        async with conn:
            data = b""
            while b"\r\n\r\n" not in data:
                data += await conn.receive()
            seen.append(data)
            await conn.send(answer)
            if not close:
                await anyio.sleep_forever()

    async with listener, anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, serve)
        yield seen
        tg.cancel_scope.cancel()


async def test_a_body_by_length_and_the_query_and_json_sent(tmp_path: Path) -> None:
    answer = b'HTTP/1.1 200 OK\r\ncontent-length: 11\r\n\r\n{"a": [1]}\n'
    async with peer(tmp_path, answer) as seen:
        r = await request(str(tmp_path / "s.sock"), "POST", "/v1/x",
                          params=[("q", "a b&c"), ("on", True)], body={"k": "é"})  # fmt: skip
    assert (r.status, r.json()) == (200, {"a": [1]})
    head, _, body = seen[0].partition(b"\r\n\r\n")
    assert head.startswith(b"POST /v1/x?q=a%20b%26c&on=true HTTP/1.1\r\n")
    assert b"Connection: close" in head


async def test_a_chunked_body_and_one_read_to_the_close(tmp_path: Path) -> None:
    chunked = (
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3;x=1\r\nabc\r\n2\r\nde\r\n0\r\n\r\n"
    )
    async with peer(tmp_path, chunked):
        r = await request(str(tmp_path / "s.sock"), "GET", "/")
    assert r.body == b"abcde"
    (tmp_path / "b").mkdir()
    async with peer(tmp_path / "b", b"HTTP/1.1 404 Not Found\r\n\r\nnope"):
        r = await request(str(tmp_path / "b" / "s.sock"), "GET", "/")
    assert (r.status, r.reason, r.text) == (404, "Not Found", "nope")


@pytest.mark.parametrize(
    "answer",
    [
        b"",  # closed at once
        b"SSH-2.0-OpenSSH\r\n\r\n",  # not HTTP
        b"HTTP/1.1 200 OK\r\nno colon\r\n\r\n",
        b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nshort",  # closed early
        b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n",  # not a size
        b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n2\r\nabcd\r\n0\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nx: " + b"a" * (HEAD_LIMIT + 10) + b"\r\n\r\n",  # a huge head
    ],
)
async def test_a_broken_answer_is_broken_never_a_hang_or_a_traceback(
    tmp_path: Path, answer: bytes
) -> None:
    async with peer(tmp_path, answer):
        with pytest.raises(Broken):
            await request(str(tmp_path / "s.sock"), "GET", "/")


async def test_a_silent_peer_and_no_socket_are_transport_errors(tmp_path: Path) -> None:
    async with peer(tmp_path, b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nab", close=False):
        with pytest.raises(TransportError, match="no answer in 0.2 s"):
            await request(str(tmp_path / "s.sock"), "GET", "/", read_for=0.2)
    with pytest.raises(TransportError, match="No such file"):
        await request(str(tmp_path / "none.sock"), "GET", "/")


async def test_a_stream_yields_what_arrives(tmp_path: Path) -> None:
    body = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n6\r\nevent:\r\n4\r\n a\n\n\r\n0\r\n\r\n"
    async with peer(tmp_path, body):
        async with stream(str(tmp_path / "s.sock"), "GET", "/v1/events") as r:
            got = [c async for c in r.chunks()]
    assert b"".join(got) == b"event: a\n\n"


async def test_the_same_request_without_an_event_loop(tmp_path: Path) -> None:
    """`request_now` (a blocking socket, for the CLI's quick path) reads what `request` reads
    and fails as it does; the test's peer runs on this loop, so it is called from a thread."""
    chunked = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n[1\r\n1\r\n]\r\n0\r\n\r\n"
    async with peer(tmp_path, chunked) as seen:
        r = await anyio.to_thread.run_sync(
            lambda: request_now(str(tmp_path / "s.sock"), "GET", "/v1/p", params=[("a", 1)])
        )
    assert (r.status, r.json()) == (200, [1])
    assert seen[0].startswith(b"GET /v1/p?a=1 HTTP/1.1\r\n")
    (tmp_path / "b").mkdir()
    async with peer(tmp_path / "b", b"HTTP/1.1 200 OK\r\ncontent-length: 9\r\n\r\nshort"):
        with pytest.raises(Broken):
            await anyio.to_thread.run_sync(
                lambda: request_now(str(tmp_path / "b" / "s.sock"), "GET", "/")
            )
    with pytest.raises(TransportError, match="No such file"):
        request_now(str(tmp_path / "none.sock"), "GET", "/")


async def test_a_request_cancelled_while_the_listener_is_full_leaves_no_failed_callback(
    tmp_path: Path,
) -> None:
    """A listener that accepts nothing and whose backlog is full: a connect waits, and its
    cancel (a console's new watch cancels its stream) must leave nothing behind (anyio's
    connect_unix then set a result on its cancelled future from a loop callback: the test's
    runner raises what a loop callback raised)."""
    path = str(tmp_path / "full.sock")
    with socket.socket(socket.AF_UNIX) as listener:
        listener.bind(path)
        listener.listen(0)
        fillers = []
        try:
            while len(fillers) < 64:
                s = socket.socket(socket.AF_UNIX)
                s.setblocking(False)
                try:
                    s.connect(path)
                except BlockingIOError:
                    s.close()
                    break
                fillers.append(s)
            for _ in range(5):
                with anyio.move_on_after(0.05) as scope:
                    await request(path, "GET", "/")
                assert scope.cancelled_caught
                await anyio.lowlevel.checkpoint()  # a loop pass: a stray callback runs
        finally:
            for s in fillers:
                s.close()


async def test_a_receive_cancelled_as_its_answer_arrives_leaves_no_failed_callback() -> None:
    """The answer arrives in the loop pass that cancels the read waiting for it (a deadline,
    a closed watch): anyio's socket stream then set a result on its cancelled future from
    its reader callback, an InvalidStateError in the loop's log (seen in CI under load).
    The client's connection (asyncio's streams) leaves nothing."""
    import asyncio

    from engine.api.uds_http import Connection

    loop = asyncio.get_running_loop()
    failed: list[dict] = []
    before = loop.get_exception_handler()
    loop.set_exception_handler(lambda _loop, context: failed.append(context))
    ours, theirs = socket.socketpair(socket.AF_UNIX)
    ours.setblocking(False)
    try:
        conn = Connection(*await asyncio.open_unix_connection(sock=ours))
        async with conn, anyio.create_task_group() as tg:
            scope = anyio.CancelScope()

            async def read() -> None:
                with scope:
                    await conn.receive(1024)

            tg.start_soon(read)
            await anyio.lowlevel.checkpoint()  # the read waits

            def arrive_and_cancel() -> None:
                theirs.send(b"HTTP/1.1 200 OK\r\n")
                scope.cancel()

            loop.call_soon(arrive_and_cancel)
            for _ in range(5):
                await anyio.lowlevel.checkpoint()  # loop passes: a stray callback runs
    finally:
        loop.set_exception_handler(before)
        theirs.close()
    assert failed == []
