"""HTTP/1.1 over the room's Unix socket: the part of it the room's API needs.

A command of the CLI makes a request or two, and a console attached to another process's
room reads one event stream; httpx (with httpcore, h11, ssl, certifi and idna behind it)
took longer to import than such a command takes to answer. This speaks the plain subset
that the owner's server (uvicorn) answers: one request a connection (`Connection: close`),
a body sent with its length, an answer's body by Content-Length, chunked transfer coding
or the end of the connection. What comes back is input from another process: a head or a
chunk line has a size limit, and an answer that breaks the protocol is `Broken`.

`request` and `stream` run on the event loop (anyio); `request_now` is the same request
made with a blocking socket, for a command that answers without starting an event loop
(engine/cli/light.py). It reads the answer to the end (the server closes: one request a
connection), then reads it with the same `_Reader`, whose reads then never wait, so its
coroutines finish at their first step without a loop.
"""

from __future__ import annotations

import json
import socket as sockets
from collections.abc import AsyncIterator, Coroutine, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import quote

if TYPE_CHECKING:
    import asyncio

T = TypeVar("T")

HEAD_LIMIT = 64 * 1024  # bytes of an answer's status line and headers
ANSWER_LIMIT = 64 * 1024 * 1024  # bytes of a whole answer read by `request_now`
READ_SIZE = 64 * 1024
Params = Iterable[tuple[str, Any]]


class TransportError(Exception):
    """The request could not be made or answered: no socket, nobody listening, silence."""


class Broken(TransportError):
    """The other side closed the connection early or answered with something not HTTP."""


@dataclass
class Response:
    """An answer: its status, headers (names in lower case) and, once read, its body."""

    status: int
    reason: str
    headers: dict[str, str]
    body: bytes = b""
    _reader: _Reader | None = field(default=None, repr=False)
    _read_for: float = 30.0

    def json(self) -> Any:
        return json.loads(self.body)

    @property
    def text(self) -> str:
        return self.body.decode("utf-8", "replace")

    async def chunks(self) -> AsyncIterator[bytes]:
        """The body as it arrives; silence longer than the read time is TransportError."""
        assert self._reader is not None, "a streamed answer"
        reader, self._reader = self._reader, None
        async for chunk in reader.body(self.headers, self._read_for):
            yield chunk

    async def read(self) -> bytes:
        self.body = b"".join([chunk async for chunk in self.chunks()])
        return self.body


async def request(socket: str, method: str, path: str, *, params: Params = (),
                  body: Any = None, headers: dict[str, str] | None = None,
                  connect_for: float = 3.0, read_for: float = 30.0) -> Response:  # fmt: skip
    """One request, its answer read whole."""
    async with stream(socket, method, path, params=params, body=body, headers=headers,
                      connect_for=connect_for, read_for=read_for) as response:  # fmt: skip
        await response.read()
        return response


@asynccontextmanager
async def stream(socket: str, method: str, path: str, *, params: Params = (),
                 body: Any = None, headers: dict[str, str] | None = None,
                 connect_for: float = 3.0, read_for: float = 30.0) -> AsyncIterator[Response]:  # fmt: skip
    """A request whose answer's body is read as it comes (`Response.chunks`); `read_for`
    is the longest silence allowed, for the head and for each read of the body. JSON
    `body` is sent as such."""
    import anyio

    try:
        with anyio.fail_after(connect_for):
            conn = await _connect(socket)
    except TimeoutError:
        raise TransportError("timed out connecting") from None
    except OSError as exc:
        raise TransportError(exc.strerror or str(exc)) from None
    async with conn:
        reader = _Reader(conn)
        try:
            await conn.send(_request_bytes(method, path, params, body, headers or {}))
            status, reason, head = await reader.head(read_for)
        except OSError as exc:
            raise TransportError(exc.strerror or str(exc)) from None
        except anyio.BrokenResourceError:
            raise Broken("the connection broke") from None
        yield Response(status, reason, head, _reader=reader, _read_for=read_for)


async def _connect(path: str) -> Connection:
    """A connection to the Unix socket at `path`. (Not anyio.connect_unix: cancelled while
    the listener's backlog is full, it can set a result on its cancelled future from a
    loop callback, a traceback in the loop's log; found by a test under load.)"""
    import asyncio

    import anyio

    raw = sockets.socket(sockets.AF_UNIX, sockets.SOCK_STREAM)
    raw.setblocking(False)
    try:
        while True:
            try:
                raw.connect(path)
                break
            except BlockingIOError:  # the backlog is full: the listener catches up soon
                await anyio.sleep(0.005)  # (a retry: nothing to wait on for a Unix socket)
        reader, writer = await asyncio.open_unix_connection(sock=raw)
    except BaseException:
        raw.close()
        raise
    return Connection(reader, writer)


class Connection:
    """A connection as asyncio's streams carry it. (Not anyio's socket stream, which waits
    for a raw socket with a reader callback that sets a future's result: a receive
    cancelled (a deadline, a client closed) while that callback was queued set a result on
    the cancelled future, an InvalidStateError in the loop's log; seen in CI under load.)"""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader, self._writer = reader, writer

    async def receive(self, max_bytes: int) -> bytes:
        import anyio

        data = await self._reader.read(max_bytes)
        if not data:
            raise anyio.EndOfStream
        return data

    async def send(self, data: bytes) -> None:
        self._writer.write(data)
        await self._writer.drain()

    async def __aenter__(self) -> Connection:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._writer.close()


def request_now(socket: str, method: str, path: str, *, params: Params = (), body: Any = None,
                timeout: float = 30.0) -> Response:  # fmt: skip
    """`request` with a blocking socket: no event loop (see the module)."""
    conn = sockets.socket(sockets.AF_UNIX, sockets.SOCK_STREAM)
    conn.settimeout(timeout)
    data = bytearray()
    try:
        conn.connect(socket)
        conn.sendall(_request_bytes(method, path, params, body, {}))
        while chunk := conn.recv(READ_SIZE):
            data += chunk
            if len(data) > ANSWER_LIMIT:
                raise Broken("the answer is too long")
    except TimeoutError:
        raise TransportError(f"no answer in {timeout:g} s") from None
    except OSError as exc:
        raise TransportError(exc.strerror or str(exc)) from None
    finally:
        conn.close()
    reader = _Reader(None, data)
    status, reason, head = _now(reader.head(timeout))
    response = Response(status, reason, head, _reader=reader, _read_for=timeout)
    _now(response.read())
    return response


def _now(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine that never waits (a `_Reader` over a whole answer) to its end."""
    try:
        coro.send(None)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]
    coro.close()
    raise AssertionError("a read of a whole answer waited")


def _request_bytes(method: str, path: str, params: Params, body: Any,
                   headers: dict[str, str]) -> bytes:  # fmt: skip
    query = "&".join(f"{quote(k, safe='')}={quote(_param(v), safe='')}" for k, v in params)
    lines = [f"{method} {path}{'?' + query if query else ''} HTTP/1.1", "Host: agentdeck",
             "Connection: close", "Accept-Encoding: identity"]  # fmt: skip
    lines += [f"{k}: {v}" for k, v in headers.items()]
    data = b""
    if body is not None:
        data = json.dumps(body, separators=(",", ":")).encode()
        lines += ["Content-Type: application/json", f"Content-Length: {len(data)}"]
    elif method not in ("GET", "HEAD"):
        lines.append("Content-Length: 0")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + data


def _param(value: Any) -> str:
    """A query value as the API reads it (a bool is `true`/`false`, as httpx sent it)."""
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


class _Reader:
    """Reads an answer off the connection: the head, then the body however it is framed."""

    def __init__(self, conn: Connection | None, whole: bytearray | None = None) -> None:
        self._conn = conn  # None: `whole` is the answer, to its end
        self._buffer = whole if whole is not None else bytearray()
        self._eof = conn is None

    async def _more(self, read_for: float) -> bool:
        if self._eof or self._conn is None:
            return False
        import anyio

        try:
            with anyio.fail_after(read_for):
                self._buffer += await self._conn.receive(READ_SIZE)
        except TimeoutError:
            raise TransportError(f"no answer in {read_for:g} s") from None
        except (anyio.EndOfStream, anyio.BrokenResourceError):
            self._eof = True
            return False
        except OSError as exc:
            raise TransportError(exc.strerror or str(exc)) from None
        return True

    async def _line(self, read_for: float) -> bytes:
        while (end := self._buffer.find(b"\r\n")) < 0:
            if len(self._buffer) > HEAD_LIMIT:
                raise Broken("a line of the answer is too long")
            if not await self._more(read_for):
                raise Broken("it closed the connection")
        line = bytes(self._buffer[:end])
        del self._buffer[: end + 2]
        return line

    async def head(self, read_for: float) -> tuple[int, str, dict[str, str]]:
        status_line = await self._line(read_for)
        parts = status_line.decode("latin-1").split(" ", 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not parts[1].isdigit():
            raise Broken(f"not an HTTP answer: {status_line[:60]!r}")
        headers: dict[str, str] = {}
        size = len(status_line)
        while line := await self._line(read_for):
            size += len(line)
            if size > HEAD_LIMIT:
                raise Broken("the answer's headers are too long")
            name, sep, value = line.decode("latin-1").partition(":")
            if not sep:
                raise Broken(f"not a header: {line[:60]!r}")
            headers[name.strip().lower()] = value.strip()
        return int(parts[1]), parts[2] if len(parts) > 2 else "", headers

    async def body(self, headers: dict[str, str], read_for: float) -> AsyncIterator[bytes]:
        if "chunked" in headers.get("transfer-encoding", "").lower():
            while True:
                size_line = (await self._line(read_for)).split(b";", 1)[0].strip()
                try:
                    size = int(size_line, 16)
                except ValueError:
                    raise Broken(f"not a chunk size: {size_line[:20]!r}") from None
                if size == 0:
                    while await self._line(read_for):  # trailers, to the blank line
                        pass
                    return
                async for piece in self._exactly(size, read_for):
                    yield piece
                if await self._line(read_for):
                    raise Broken("a chunk longer than its size")
        elif (length := headers.get("content-length")) is not None:
            if not length.isdigit():
                raise Broken(f"not a length: {length[:20]!r}")
            async for piece in self._exactly(int(length), read_for):
                yield piece
        else:  # to the end of the connection
            while self._buffer or await self._more(read_for):
                piece = bytes(self._buffer)
                self._buffer.clear()
                yield piece

    async def _exactly(self, size: int, read_for: float) -> AsyncIterator[bytes]:
        """The next `size` bytes, as they arrive (Broken if the connection ends first)."""
        while size:
            if not self._buffer and not await self._more(read_for):
                raise Broken("it closed the connection")
            piece = bytes(self._buffer[:size])
            del self._buffer[:size]
            size -= len(piece)
            yield piece
